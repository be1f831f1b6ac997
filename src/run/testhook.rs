//! A pause for the fault tests, read in this one place: `BAKEOFF_TEST_PAUSE_AT=POINT:FILE`
//! makes the run, on reaching the named point, create FILE (holding its pid) and wait there for an
//! hour or until the test removes FILE, so a test can kill or signal bakeoff at exactly that
//! point (and let it go on); `POINT:FILE;POINT:FILE` pauses at each. TEST-ONLY: never set it in
//! production.
//!
//! Points: `launch-unrecorded` (an arm was started, its pid or job id not yet in the launch
//! journal; `launch-unrecorded@ARM`: only arm ARM's launch),
//! `arm-start@ARM` (arm ARM's turn came on its lane, nothing of it launched yet),
//! `arm-ready@ARM` (arm ARM is ready, its measurement not begun),
//! `trace-replay@ARM` (arm ARM's trace replay is planned, none of its requests sent),
//! `incumbent-stopped` (the incumbent was stopped, the step not yet recorded),
//! `restoration-launched` (the restored incumbent was started, not yet ready),
//! `restoration-preflight` (the restoration's last step began: its preflight requests not sent);
//! a promotion's: `promote-before-stop`, `promote-incumbent-stopped`, `promote-winner-launched`,
//! `promote-baking` (after the first interval), `promote-rollback` (the winner stopped, the
//! incumbent not yet restored), `promote-restore-launched`.

use std::time::Duration;

/// The environment variable (test-only).
pub const ENV: &str = "BAKEOFF_TEST_PAUSE_AT";

/// Pauses here when [`ENV`] names `point`.
pub async fn pause(point: &str) {
    pause_for(point, "").await
}

/// Pauses here when [`ENV`] names `point`, or `point@ARM` with `arm` (a point that several arms
/// reach: `launch-unrecorded@sl` pauses at arm `sl`'s launch only).
pub async fn pause_for(point: &str, arm: &str) {
    let Ok(v) = std::env::var(ENV) else { return };
    // Several pauses in one run: `POINT:FILE;POINT:FILE`.
    let here = v.split(';').find_map(|e| {
        let (p, file) = e.split_once(':')?;
        let at = match p.split_once('@') {
            Some((p, a)) => p == point && a == arm,
            None => p == point,
        };
        at.then_some(file)
    });
    let Some(file) = here else { return };
    let _ = std::fs::write(file, std::process::id().to_string());
    let until = std::time::Instant::now() + Duration::from_secs(3600);
    while std::path::Path::new(file).exists() && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
