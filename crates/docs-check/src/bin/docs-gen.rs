//! Writes `docs/src/performance.md` from `bench/results/*.json` (`make docs` runs it).

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = stratus_docs_check::repo_root();
    match stratus_docs_check::bench::render_dir(&root.join("bench/results")) {
        Ok(page) => {
            let out = root.join(stratus_docs_check::bench::PAGE);
            if let Err(e) = std::fs::write(&out, page) {
                eprintln!("docs-gen: cannot write {}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            println!("docs-gen: wrote {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("docs-gen: {e}");
            ExitCode::FAILURE
        }
    }
}
