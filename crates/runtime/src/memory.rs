//! Allocator tuning for long-running controllers.
// Unsafe code in this file: mallopt tunes glibc's allocator (no safe wrapper exists).
#![allow(unsafe_code)]

/// Tunes glibc malloc for a controller's allocation pattern: few threads, and large short-lived
/// buffers (API list bodies of several MB) between long idle periods.
///
/// - At most two arenas: per-thread arenas (up to 8 per core by default) mostly add resident
///   memory that is never given back.
/// - A fixed 128 KiB mmap threshold: big buffers come from `mmap` and return to the system when
///   freed, instead of growing the heap (glibc otherwise raises the threshold dynamically up to
///   32 MiB). Measured on `make bench-nodes`: peak RSS 41.5 → 31.8 MiB at 1000 nodes.
///
/// No effect with other C libraries.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called once at start-up before threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
