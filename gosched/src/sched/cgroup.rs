//! Default procs from the CPU quota (Go 1.25's cgroup-aware GOMAXPROCS).
//!
//! A container limited to 1.5 CPUs on a 64-core host should not run 64 Ps:
//! the kernel throttles the whole cgroup once the quota is used, and every
//! throttle stalls all threads for the rest of the period. So the default
//! procs are `ceil(quota / period)` — at least 2 (a quota of 0.5 CPU still
//! gets two Ps, so one blocked P does not stop everything; Go does the same),
//! never above the CPUs this process may run on (its affinity mask).
//!
//! Unlike Go (golang/go#81180, which reads only the leaf), every visible
//! ancestor of our cgroup is read and the tightest quota wins: a limit set
//! on a parent slice binds its children too.
//!
//! - cgroup v2: `/proc/self/cgroup` has `0::/path`; each of `<root>/path`,
//!   its parents up to `<root>`, may have `cpu.max` = `"<quota> <period>"`
//!   or `"max <period>"`.
//! - cgroup v1: a line `N:...cpu...:/path`; `<root>/cpu,cpuacct/path` (or
//!   `<root>/cpu/path`) and its parents have `cpu.cfs_quota_us` (-1: none)
//!   and `cpu.cfs_period_us`.
//!
//! `<root>` is `/sys/fs/cgroup`; the tests pass a fake tree instead.

use std::path::{Path, PathBuf};

/// Where cgroup file systems are mounted.
pub(crate) const ROOT: &str = "/sys/fs/cgroup";

/// Procs by default: the quota, rounded up, between 2 and the CPU count
/// (the CPU count alone when there is no quota or it cannot be read).
pub(crate) fn quota_procs() -> usize {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    procs_for(cpu_count(), quota(Path::new(ROOT), &own))
}

/// `quota_procs` from a CPU count and a quota in CPUs.
pub(crate) fn procs_for(cpus: usize, quota: Option<f64>) -> usize {
    match quota {
        Some(q) if q > 0.0 => (q.ceil() as usize).max(2).min(cpus).max(1),
        _ => cpus.max(1),
    }
}

/// CPUs in this process's affinity mask (what it may run on, before any
/// quota; `available_parallelism` already folds a quota in, rounded down).
pub(crate) fn cpu_count() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for pid 0 (this thread) and we only read it after success.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The tightest CPU quota (in CPUs) over our cgroup and its ancestors, read
/// under `root`; `own` is the text of `/proc/self/cgroup`.
pub(crate) fn quota(root: &Path, own: &str) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut take = |q: Option<f64>| {
        if let Some(q) = q {
            best = Some(best.map_or(q, |b| b.min(q)));
        }
    };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            // v2: the unified hierarchy.
            for dir in ancestors(root, path) {
                take(read_v2(&dir));
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            // v1: the cpu controller's hierarchy, under whichever name it
            // is mounted.
            for mount in ["cpu,cpuacct", "cpuacct,cpu", "cpu"] {
                let base = root.join(mount);
                if base.is_dir() {
                    for dir in ancestors(&base, path) {
                        take(read_v1(&dir));
                    }
                    break;
                }
            }
        }
    }
    best
}

/// `base/path` and each parent of it down to `base` itself.
fn ancestors(base: &Path, path: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = base.join(path.trim_start_matches('/'));
    loop {
        out.push(dir.clone());
        if dir == base || !dir.pop() || !dir.starts_with(base) {
            break;
        }
    }
    out
}

/// v2 `cpu.max`: `"<quota> <period>"` → quota / period; `"max ..."`: none.
fn read_v2(dir: &Path) -> Option<f64> {
    let s = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    let mut it = s.split_whitespace();
    let quota: f64 = it.next()?.parse().ok()?; // "max" does not parse
    let period: f64 = it.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

/// v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (a quota of -1: none).
fn read_v1(dir: &Path) -> Option<f64> {
    let read = |f: &str| -> Option<f64> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let quota = read("cpu.cfs_quota_us")?;
    let period = read("cpu.cfs_period_us")?;
    (quota > 0.0 && period > 0.0).then(|| quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosched-cgroup-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn v2_leaf_quota() {
        let root = tree("v2leaf");
        let leaf = root.join("a/b");
        fs::create_dir_all(&leaf).unwrap();
        fs::write(root.join("cpu.max"), "max 100000\n").unwrap();
        fs::write(leaf.join("cpu.max"), "150000 100000\n").unwrap();
        assert_eq!(quota(&root, "0::/a/b\n"), Some(1.5));
        assert_eq!(procs_for(64, quota(&root, "0::/a/b\n")), 2);
        let _ = fs::remove_dir_all(&root);
    }

    /// A parent's tighter limit wins over the leaf's (Go reads only the
    /// leaf: golang/go#81180).
    #[test]
    fn v2_tightest_ancestor_wins() {
        let root = tree("v2anc");
        let leaf = root.join("slice/svc");
        fs::create_dir_all(&leaf).unwrap();
        fs::write(root.join("slice/cpu.max"), "300000 100000\n").unwrap();
        fs::write(leaf.join("cpu.max"), "max 100000\n").unwrap();
        assert_eq!(quota(&root, "0::/slice/svc\n"), Some(3.0));
        assert_eq!(procs_for(64, Some(3.0)), 3);
        assert_eq!(procs_for(2, Some(3.0)), 2, "never above the CPU count");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn v1_quota_and_unlimited() {
        let root = tree("v1");
        let dir = root.join("cpu,cpuacct/docker/x");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("cpu.cfs_quota_us"), "250000\n").unwrap();
        fs::write(dir.join("cpu.cfs_period_us"), "100000\n").unwrap();
        let own = "12:cpu,cpuacct:/docker/x\n3:memory:/docker/x\n";
        assert_eq!(quota(&root, own), Some(2.5));
        assert_eq!(procs_for(16, Some(2.5)), 3);
        fs::write(dir.join("cpu.cfs_quota_us"), "-1\n").unwrap();
        assert_eq!(quota(&root, own), None);
        assert_eq!(procs_for(16, None), 16);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn no_cgroup_files_means_no_quota() {
        let root = tree("none");
        assert_eq!(quota(&root, "0::/user.slice\n"), None);
        assert_eq!(quota(&root, ""), None);
        assert_eq!(procs_for(8, Some(0.2)), 2, "at least two Ps");
        assert_eq!(procs_for(1, Some(0.2)), 1, "but never above the CPUs");
        let _ = fs::remove_dir_all(&root);
    }
}
