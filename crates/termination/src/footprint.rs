//! Resident-memory trimming for the per-node (IMDS-mode) process: once started, the pages of
//! the executable touched only during start-up (client set-up, TLS, flag parsing) are handed
//! back with `MADV_PAGEOUT`; the idle loop faults back the few it uses. Anonymous memory is
//! already small (a current-thread runtime, a tuned allocator).
// madvise(MADV_PAGEOUT) on our own read-only executable mappings has no safe wrapper.
#![allow(unsafe_code)]

/// File-backed mappings of this executable in `/proc/self/maps` text: `(start, end)`.
pub fn executable_mappings(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            // Read-only or executable, not writable: clean pages that can be dropped.
            if path != exe || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect()
}

/// Pages out the executable's clean mappings; returns how many bytes were advised (0 where
/// unsupported).
pub fn page_out_executable() -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return 0;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return 0;
        };
        let mut advised = 0;
        for (start, end) in executable_mappings(&maps, &exe.to_string_lossy()) {
            // SAFETY: the range is a whole mapping of this process taken from /proc/self/maps;
            // MADV_PAGEOUT only drops clean pages, which are faulted back from the file.
            let rc = unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT)
            };
            if rc == 0 {
                advised += end - start;
            }
        }
        advised
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_clean_mappings_of_the_executable() {
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 123 /usr/bin/nth
55d0c0100000-55d0c0900000 r-xp 00100000 fd:01 123 /usr/bin/nth
55d0c0900000-55d0c0a00000 rw-p 00900000 fd:01 123 /usr/bin/nth
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
";
        assert_eq!(
            executable_mappings(maps, "/usr/bin/nth"),
            [
                (0x55d0c0000000, 0x55d0c0100000),
                (0x55d0c0100000, 0x55d0c0900000)
            ]
        );
    }
}
