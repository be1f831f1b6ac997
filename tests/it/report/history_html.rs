//! `bakeoff history report --html` in headless Chromium, like report.html (`browser.rs`): every
//! series' trend renders with its axes titled and its legend, the page loads nothing.

use super::browser::{check_chart, check_page, check_self_contained, load};
use crate::support::history::{bundle, Run};
use crate::support::{text, BIN};
use std::process::Command;

#[test]
fn the_trend_page_draws_every_series_with_its_change_point() {
    // Chromium takes both cores for a moment: never beside a timing test.
    let _g = crate::support::shared();
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("h.sqlite");
    let mut dirs = Vec::new();
    for n in 0..12 {
        let r = Run::new(
            n,
            if n >= 6 { 60.0 } else { 50.0 } + (n % 3) as f64 * 0.2,
            40.0,
        );
        dirs.push(bundle(t.path(), &r));
    }
    let o = Command::new(BIN)
        .args(["history", "add", "--db"])
        .arg(&db)
        .args(&dirs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let page = t.path().join("trend.html");
    let o = Command::new(BIN)
        .args([
            "history",
            "report",
            "--metric",
            "ttft_p50@c1",
            "--min-points",
            "3",
            "--db",
        ])
        .arg(&db)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    check_self_contained(&html);
    assert!(
        html.contains("1 change point(s), 1 of them regressions"),
        "{html:.2000}"
    );
    let shown = load(&page, &t.path().join("chromium"));
    check_page(&shown, &["series-0", "series-1"]);
    let names = vec!["median".to_string(), "interval".to_string()];
    for c in shown.status["charts"].as_array().unwrap() {
        check_chart(c, &names);
    }
    let inc = &shown.status["charts"][1];
    assert!(
        inc["legend"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "change point"),
        "the change point is not drawn: {inc:#}"
    );
}
