//! Figures that say what they rest on (docs/verdict.md): with `ignore_eos` an arm whose engine
//! does not honor the output length (reference fault `max_output_tokens`) fails `compatibility`
//! with the counts, and an arm's reasoning tokens are stated apart from its visible ones; both
//! wordings reach decision-summary.json and publication-summary.md.

use crate::support::campaign::*;

#[test]
fn an_arm_whose_responses_stop_short_fails_compatibility_and_reasoning_is_stated_apart() {
    // Failure classes and counts, no timing figure.
    let _g = crate::support::shared();
    let t = Camp::new();
    let fast = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
    t.profile("inc", fast);
    t.profile("short", &format!("{fast}\nmax_output_tokens = 4"));
    t.profile("thinker", &format!("{fast}\nreasoning_tokens = 4"));
    let small = Small {
        max_tokens: 16,
        reps: 2,
        ignore_eos: true,
        ..Small::default()
    };
    let file = t.write_small(
        "disclosure",
        &small,
        &[
            ("inc", "incumbent"),
            ("short", "candidate"),
            ("thinker", "candidate"),
        ],
    );
    let (b, out) = t.run_ok_text("inc", &file);
    let r = json(&b.join("campaign-result.json"));
    let short = r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "short")
        .unwrap();
    let warm = &short["warm"]["output_length"];
    assert_eq!(warm["asked"], 16, "{short:#}\n{out}");
    assert_eq!(warm["short"], warm["requests"], "{warm:#}");
    assert_eq!(warm["min_tokens"], 4, "{warm:#}");
    let s = json(&b.join("decision-summary.json"));
    let f = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["candidate"] == "short")
        .unwrap_or_else(|| panic!("short did not fail: {s:#}"));
    assert_eq!(f["class"], "compatibility", "{f:#}");
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("output length not honored: ")
            && detail.contains(
                "requests stopped short of the 16 completion tokens asked (ignore_eos; fewest 4: "
            ),
        "{detail}"
    );
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains("output length not honored"), "{md}");
    let lim: Vec<&str> = s["limitations"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let said = lim
        .iter()
        .find(|l| {
            l.starts_with("thinker spent ") && l.contains(" timed completion tokens reasoning (")
        })
        .unwrap_or_else(|| panic!("no reasoning line: {s:#}"));
    assert!(md.contains(said), "{said}\n{md}");
    // The engines that honor the length are not flagged.
    for a in s["arms"].as_array().unwrap() {
        if a["id"] != "short" {
            assert!(
                !a["decision"].as_str().unwrap().contains("stopped short"),
                "{a:#}"
            );
        }
    }
    verify(&b);
}
