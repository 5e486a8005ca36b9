//! `--profiling`: CPU profiles on the secure port at `/debug/pprof/profile?seconds=N` (default 30),
//! in the pprof protobuf format Go's tools read (`go tool pprof`, Grafana Pyroscope), sampled at
//! 100 Hz as Go's profiler; one profile at a time. Go's runtime profiles (heap, goroutine, block,
//! mutex…) have no counterpart in a Rust process and answer 404 saying so.

use std::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};
use tokio::sync::Mutex;

use crate::handler::{text, Body};

/// Go's default profile length.
const DEFAULT_SECONDS: u64 = 30;
/// The longest profile asked for at once.
const MAX_SECONDS: u64 = 300;
/// Samples a second, as Go's CPU profiler.
const FREQUENCY: i32 = 100;

/// Only one CPU profile runs at a time (the sampler is process-wide).
static RUNNING: Mutex<()> = Mutex::const_new(());

/// What a `/debug/pprof/…` path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfilePath {
    /// `/debug/pprof/`: the list.
    Index,
    /// `/debug/pprof/profile`.
    Cpu,
    /// Another Go profile name.
    Unavailable(String),
}

impl ProfilePath {
    /// The profile `path` names, if it is under `/debug/pprof/`.
    pub fn of(path: &str) -> Option<ProfilePath> {
        let rest = path.strip_prefix("/debug/pprof")?.trim_start_matches('/');
        Some(match rest {
            "" => ProfilePath::Index,
            "profile" => ProfilePath::Cpu,
            other => ProfilePath::Unavailable(other.to_string()),
        })
    }
}

/// `seconds=N` of the query, within bounds.
pub fn seconds(query: Option<&str>) -> Result<Duration, String> {
    let value = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|p| p.strip_prefix("seconds="));
    let seconds = match value {
        None => DEFAULT_SECONDS,
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=MAX_SECONDS).contains(s))
            .ok_or_else(|| format!("seconds: a whole number from 1 to {MAX_SECONDS}"))?,
    };
    Ok(Duration::from_secs(seconds))
}

/// Answers a `/debug/pprof/…` request.
pub async fn answer(path: ProfilePath, query: Option<&str>) -> Response<Body> {
    match path {
        ProfilePath::Index => text(
            StatusCode::OK,
            "profiles:\n  profile  CPU profile in pprof format (?seconds=N, default 30)\n",
        ),
        ProfilePath::Unavailable(name) => text(
            StatusCode::NOT_FOUND,
            format!("{name}: a Go runtime profile; this process offers the CPU profile (/debug/pprof/profile)\n"),
        ),
        ProfilePath::Cpu => {
            let duration = match seconds(query) {
                Ok(d) => d,
                Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            };
            let Ok(_running) = RUNNING.try_lock() else {
                return text(
                    StatusCode::CONFLICT,
                    "another CPU profile is running; try again when it ends\n",
                );
            };
            match cpu_profile(duration).await {
                Ok(bytes) => {
                    let mut r = Response::new(Body::new(bytes.into()));
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    );
                    r.headers_mut().insert(
                        header::CONTENT_DISPOSITION,
                        HeaderValue::from_static("attachment; filename=\"profile\""),
                    );
                    r
                }
                Err(e) => {
                    tracing::warn!(error = e, "CPU profile failed");
                    text(StatusCode::INTERNAL_SERVER_ERROR, format!("profile failed: {e}\n"))
                }
            }
        }
    }
}

/// Samples the process for `duration` and encodes the profile.
async fn cpu_profile(duration: Duration) -> Result<Vec<u8>, String> {
    use pprof::protos::Message;
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| e.to_string())?;
    tokio::time::sleep(duration).await;
    let report = guard.report().build().map_err(|e| e.to_string())?;
    let profile = report.pprof().map_err(|e| e.to_string())?;
    Ok(profile.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_seconds() {
        assert_eq!(ProfilePath::of("/debug/pprof/"), Some(ProfilePath::Index));
        assert_eq!(ProfilePath::of("/debug/pprof"), Some(ProfilePath::Index));
        assert_eq!(
            ProfilePath::of("/debug/pprof/profile"),
            Some(ProfilePath::Cpu)
        );
        assert_eq!(
            ProfilePath::of("/debug/pprof/heap"),
            Some(ProfilePath::Unavailable("heap".into()))
        );
        assert_eq!(ProfilePath::of("/metrics"), None);
        assert_eq!(seconds(None).unwrap(), Duration::from_secs(30));
        assert_eq!(seconds(Some("seconds=2")).unwrap(), Duration::from_secs(2));
        assert!(seconds(Some("seconds=0")).is_err());
        assert!(seconds(Some("seconds=abc")).is_err());
        assert!(seconds(Some("seconds=301")).is_err());
    }

    #[tokio::test]
    async fn a_cpu_profile_is_a_pprof_protobuf() {
        use pprof::protos::Message;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        // Busy for the whole profile, however the machine's other work delays either side.
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let busy = std::thread::spawn(move || {
            // Arithmetic, the flag read rarely: samples land in this code, not in the vDSO.
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..1_000_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            x
        });
        let bytes = cpu_profile(Duration::from_secs(1)).await.unwrap();
        done.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        let profile = pprof::protos::Profile::decode(bytes.as_slice()).unwrap();
        assert!(!profile.sample.is_empty(), "a busy second leaves samples");
        assert!(profile.string_table.iter().any(|s| s == "cpu"));
    }
}
