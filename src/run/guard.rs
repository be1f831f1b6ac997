//! The guard around a step's engine work: it runs in its own task, raced against the
//! cancellation watch, and a panic becomes a failed step instead of ending the run before the
//! restoration.

use tokio::sync::watch;

/// The first signal's name, once one arrived.
pub type Cancel = watch::Receiver<Option<&'static str>>;

pub enum Guarded<T> {
    Done(T),
    Panicked(String),
    Cancelled,
}

pub async fn wait_cancel(mut rx: Cancel) {
    loop {
        if rx.borrow_and_update().is_some() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Runs `fut` in its own task, raced against the cancellation watch: a cancelled step is
/// aborted, a panicking one becomes a message (the runner records it as a `crash`).
pub async fn guarded<T: Send + 'static>(
    cancel: &Cancel,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Guarded<T> {
    if cancel.borrow().is_some() {
        return Guarded::Cancelled;
    }
    let mut h = tokio::spawn(fut);
    tokio::select! {
        r = &mut h => match r {
            Ok(v) => Guarded::Done(v),
            Err(e) if e.is_panic() => Guarded::Panicked(panic_message(e.into_panic())),
            Err(e) => Guarded::Panicked(format!("the step's task failed: {e}")),
        },
        _ = wait_cancel(cancel.clone()) => {
            h.abort();
            Guarded::Cancelled
        }
    }
}

/// Polls `fut`, turning a panic into its message: a step that panics outside its guarded task
/// fails (class `crash`) instead of ending the run before the restoration.
pub async fn catch_panic<F: std::future::Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |ctx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(ctx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(p) => std::task::Poll::Ready(Err(panic_message(p))),
        }
    })
    .await
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into());
    format!("the step panicked: {msg}")
}
