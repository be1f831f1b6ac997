//! The measurement session shared by `bakeoff bench` and a campaign's timing steps: a typed
//! spec (`spec`), one `prepare` that sizes any source exactly (`prepare`, `source`, `conv`),
//! the load shape and its levels (`sweep`), the run of each level (`session`), one SLO judge
//! with goodput (`slo`), one per-request line writer (`line`) and the typed report (`report`).
//!
//! It sits at the measurement floor: it imports nothing above `load` (no campaign, run,
//! decide, report or cli code), never prints (notes go to an `observe::Observer`) and holds no
//! command-line types.

pub mod capacity;
pub mod conv;
pub mod line;
pub mod observe;
pub mod prepare;
pub mod report;
pub mod session;
pub mod slo;
pub mod source;
pub mod spec;
pub mod sweep;
pub mod trace;

pub use observe::{Observer, Progress, Quiet};
pub use report::{BenchReport, LoadMode, LoadRecord, SentRequest};
pub use session::{run_levels, run_one};
pub use spec::{ArrivalKind, BenchSpec, ConvSpec, DatasetSpec, Labels, LoadShape, SourceSpec};
pub use trace::TraceSpec;
