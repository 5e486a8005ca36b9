//! Memory tuning for long-running controllers.

/// Caps glibc's malloc arenas at two. A controller's heap is small and shared by few threads;
/// per-thread arenas (up to 8 per core by default) mostly add resident memory that is never
/// given back. No effect on other C libraries.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called once at start-up before threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
