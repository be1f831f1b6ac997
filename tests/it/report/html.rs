//! report.html in headless Chromium: the page renders its charts, no script error or console
//! error occurs (the page sets its title to `ok` only then), and the screenshot is far from
//! blank. Needs Debian's `chromium` (`apt-get install -y chromium`); without it this test fails.

use crate::support::decide_fixture as fixture;

use std::path::Path;
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium(profile: &Path, args: &[&str], url: &str) -> std::process::Output {
    Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(["--enable-logging=stderr", "--v=0", "--window-size=1200,900"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs")
}

#[test]
fn report_html_renders_in_headless_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install it with `apt-get install -y chromium` (the report test needs a headless browser)"
    );
    let d = tempfile::tempdir().unwrap();
    let bundle = d.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    fixture::write_bundle(&bundle, &fixture::seed());
    bakeoff::report::render_all(&bundle).unwrap();
    let page = bundle.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("http://")
            || html
                .matches("http://")
                .all(|_| html.contains("xmlns=\"http://www.w3.org/2000/svg\""))
    );
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the page must not load anything"
    );
    let url = format!("file://{}", page.display());

    let out = chromium(&d.path().join("p1"), &["--dump-dom"], &url);
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        dom.contains("<title>ok</title>"),
        "the page did not report ok:\n{}\n{log}",
        &dom[..dom.len().min(2000)]
    );
    assert!(dom.matches("<svg").count() >= 4, "expected 4 charts");
    assert!(
        dom.contains("class=\"pt\"")
            && dom.contains("class=\"series\"")
            && dom.contains("class=\"bar\"")
    );
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && l.to_lowercase().contains("error"))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");

    // Screenshot against a blank page's: the rendered report is several times larger.
    let shot = d.path().join("report.png");
    let out = chromium(
        &d.path().join("p2"),
        &[&format!("--screenshot={}", shot.display())],
        &url,
    );
    assert!(shot.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let blank_page = d.path().join("blank.html");
    std::fs::write(&blank_page, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank = d.path().join("blank.png");
    chromium(
        &d.path().join("p3"),
        &[&format!("--screenshot={}", blank.display())],
        &format!("file://{}", blank_page.display()),
    );
    let (a, b) = (
        std::fs::metadata(&shot).unwrap().len(),
        std::fs::metadata(&blank).unwrap().len(),
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        a > 5 * b && a > 20_000,
        "screenshot {a} bytes vs blank {b} bytes"
    );
}
