//! Series: one figure of one recipe identity on one GPU model and lane, over time.

use super::sql::Value;
use super::store::Store;
use anyhow::Result;
use std::collections::BTreeMap;

/// Which points to read (every field optional; all given must match).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub model: Option<String>,
    pub engine: Option<String>,
    /// A part of the GPU model's name (`H200` matches `NVIDIA H200`).
    pub gpu: Option<String>,
    pub lane: Option<String>,
    /// A figure or its start (`ttft` matches `ttft_p50@c1`, `ttft_p50@c4`).
    pub metric: Option<String>,
    pub arm: Option<String>,
    /// Campaigns started at or after this RFC 3339 time (or date).
    pub since: Option<String>,
}

/// What may change under one recipe identity from one run to the next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    pub engine_version: String,
    pub driver: String,
    pub image: String,
    pub program: String,
}

impl Facts {
    /// What differs from `before`, in words: `profile/program fingerprint 1a2b → 3c4d`.
    pub fn changes_from(&self, before: &Facts) -> Vec<String> {
        let mut out = Vec::new();
        let mut one = |what: &str, a: &str, b: &str| {
            if a != b {
                let show = |s: &str| {
                    if s.is_empty() {
                        "(none)".to_string()
                    } else {
                        s.to_string()
                    }
                };
                out.push(format!("{what} {} → {}", show(a), show(b)));
            }
        };
        one(
            "engine version",
            &before.engine_version,
            &self.engine_version,
        );
        one("driver", &before.driver, &self.driver);
        one("image", &before.image, &self.image);
        one(
            "profile/program fingerprint",
            &before.program,
            &self.program,
        );
        out
    }
}

/// One run's value of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub digest: String,
    pub campaign_id: String,
    pub started_at: String,
    pub path: String,
    pub role: String,
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub n: u64,
    pub facts: Facts,
}

/// What a series is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub figure: String,
    /// `arm|engine|model|quantization|speculative` (`ingest::ArmSummary::recipe`).
    pub recipe: String,
    pub gpu_model: String,
    pub lane: String,
}

impl Key {
    pub fn arm(&self) -> &str {
        self.recipe.split('|').next().unwrap_or("")
    }

    /// `inc (reference, m) ttft_p50@c1 on none, lane 127.0.0.1:8000`
    pub fn describe(&self) -> String {
        let p: Vec<&str> = self.recipe.split('|').collect();
        let extra: Vec<&str> = p
            .iter()
            .skip(3)
            .copied()
            .filter(|s| !s.is_empty())
            .collect();
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!(", {}", extra.join(", "))
        };
        format!(
            "{} ({}, {}{extra}) {} on GPU {}, lane {}",
            p.first().unwrap_or(&""),
            p.get(1).unwrap_or(&""),
            p.get(2).unwrap_or(&""),
            self.figure,
            self.gpu_model,
            self.lane
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub key: Key,
    /// Oldest first.
    pub points: Vec<Point>,
}

/// Whether more of this figure is better (throughputs) or worse (latencies).
pub fn higher_is_better(figure: &str) -> bool {
    figure.contains("tok_s")
}

/// The figure's unit, for the text.
pub fn unit(figure: &str) -> &'static str {
    if higher_is_better(figure) {
        "tok/s"
    } else {
        "ms"
    }
}

/// The filter's conditions appended to `sql` (bundles `b`, arms `a`, figures `f`; the metric
/// only when `metric`), and their parameters in order.
fn where_clauses(f: &Filter, metric: bool, sql: &mut String) -> Vec<Value> {
    let mut p = Vec::new();
    let mut cond = |clause: &str, v: Option<String>| {
        if let Some(v) = v {
            sql.push_str(clause);
            p.push(Value::T(Some(v)));
        }
    };
    cond(" AND a.model = ?", f.model.clone());
    cond(" AND a.engine = ?", f.engine.clone());
    cond(
        " AND b.gpu_model LIKE ?",
        f.gpu.as_ref().map(|g| format!("%{g}%")),
    );
    // Each arm's own lane (a multi-lane bundle's arms ran on several).
    cond(" AND a.lane = ?", f.lane.clone());
    if metric {
        cond(
            " AND f.figure LIKE ?",
            f.metric.as_ref().map(|m| format!("{m}%")),
        );
    }
    cond(" AND b.started_at >= ?", f.since.clone());
    p
}

/// `--arm`: the arm of the row's recipe (`recipe_arm`), compared here rather than in SQL so
/// that a lane's control copy, stored as `inc.control@g1` (one row per lane), is `--arm
/// inc.control` on every lane, exactly on both backends (SQLite's LIKE ignores case).
fn arm_matches(f: &Filter, recipe: &str) -> bool {
    f.arm
        .as_deref()
        .is_none_or(|a| recipe.split('|').next() == Some(a))
}

/// Reads every series the filter selects, each oldest first.
pub fn read(store: &mut Store, f: &Filter) -> Result<Vec<Series>> {
    let mut sql = String::from(
        "SELECT f.figure, a.recipe, b.gpu_model, a.lane, b.digest, b.campaign_id, b.started_at, b.path, a.role, f.value, f.lo, f.hi, f.n, a.engine_version, b.driver, a.image, a.program \
         FROM figures f JOIN arms a ON a.digest = f.digest AND a.arm = f.arm JOIN bundles b ON b.digest = f.digest WHERE 1 = 1",
    );
    let p = where_clauses(f, true, &mut sql);
    sql.push_str(" ORDER BY b.started_at, b.digest");
    let rows = store.query(&sql, &p)?;
    let mut by: BTreeMap<Key, Vec<Point>> = BTreeMap::new();
    for r in rows.into_iter().filter(|r| arm_matches(f, &r[1].str())) {
        let key = Key {
            figure: r[0].str(),
            recipe: r[1].str(),
            gpu_model: r[2].str(),
            lane: r[3].str(),
        };
        by.entry(key).or_default().push(Point {
            digest: r[4].str(),
            campaign_id: r[5].str(),
            started_at: r[6].str(),
            path: r[7].str(),
            role: r[8].str(),
            value: r[9].float().unwrap_or(f64::NAN),
            lo: r[10].float(),
            hi: r[11].float(),
            n: r[12].int().unwrap_or(0).max(0) as u64,
            facts: Facts {
                engine_version: r[13].str(),
                driver: r[14].str(),
                image: r[15].str(),
                program: r[16].str(),
            },
        });
    }
    Ok(by
        .into_iter()
        .map(|(key, points)| Series { key, points })
        .collect())
}

/// One bundle in the history, for `history list`; a multi-lane bundle is one row per lane its
/// arms ran on, each with those arms.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleRow {
    pub digest: String,
    pub campaign_id: String,
    pub started_at: String,
    pub gpu_model: String,
    pub lane: String,
    /// The arms on `lane`, comma-separated.
    pub arms: String,
    pub winner: String,
    pub path: String,
}

/// The bundles whose arms match the filter (its metric is ignored), oldest first: one row per
/// bundle and lane (a one-lane bundle's arms share its lane: one row).
pub fn bundles(store: &mut Store, f: &Filter) -> Result<Vec<BundleRow>> {
    let mut sql = String::from(
        "SELECT b.digest, b.campaign_id, b.started_at, b.gpu_model, a.lane, b.winner, b.path, a.arm, a.recipe \
         FROM bundles b JOIN arms a ON a.digest = b.digest WHERE 1 = 1",
    );
    let p = where_clauses(f, false, &mut sql);
    sql.push_str(" ORDER BY b.started_at, b.digest, a.lane, a.arm");
    let mut out: Vec<BundleRow> = Vec::new();
    for r in store.query(&sql, &p)? {
        if !arm_matches(f, &r[8].str()) {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.digest == r[0].str() && last.lane == r[4].str() => {
                last.arms.push(',');
                last.arms.push_str(&r[7].str());
            }
            _ => out.push(BundleRow {
                digest: r[0].str(),
                campaign_id: r[1].str(),
                started_at: r[2].str(),
                gpu_model: r[3].str(),
                lane: r[4].str(),
                winner: r[5].str(),
                path: r[6].str(),
                arms: r[7].str(),
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::Facts;

    #[test]
    fn a_change_point_names_each_recorded_fact_that_changed() {
        let before = Facts {
            engine_version: "0.10.1".into(),
            driver: "570.86".into(),
            image: String::new(),
            program: "1a2b3c4d5e6f".into(),
        };
        let after = Facts {
            engine_version: "0.11.0".into(),
            image: "vllm@sha256:ab12".into(),
            ..before.clone()
        };
        assert_eq!(
            after.changes_from(&before),
            [
                "engine version 0.10.1 → 0.11.0",
                "image (none) → vllm@sha256:ab12"
            ]
        );
        assert!(before.changes_from(&before).is_empty());
    }
}
