//! Reading this process's memory figures from `/proc/self/status`.

/// A `kB` field of `/proc/self/status`, e.g. `VmRSS` or `VmHWM`.
pub fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}
