//! `bakeoff bench`'s documents, from the typed `bench::BenchReport`: the `--html` page
//! (`html.rs`, drawn with `report::chartkit` like `report.html`), and `--csv` / `--export-vllm`
//! (`export.rs`; the statistics columns are `report::csv`'s, shared with `arm-stats.csv`).

pub mod export;
pub mod html;
