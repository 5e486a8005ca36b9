//! The docs held to the code: generated numbers up to date, the crate table equal to the
//! workspace, every link resolving, the README a front door, and the mdBook build clean.

use std::path::{Path, PathBuf};
use std::process::Command;
use stratus_docs_check::{bench, crates, links, repo_root};

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("docs/src is readable")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            markdown_under(&path, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("md") {
            out.push(path);
        }
    }
}

#[test]
fn the_performance_page_is_what_the_bench_results_give() {
    let root = repo_root();
    let want = bench::render_dir(&root.join("bench/results")).unwrap_or_else(|e| panic!("{e}"));
    let have = std::fs::read_to_string(root.join(bench::PAGE)).unwrap_or_default();
    assert!(
        have == want,
        "{} is not what bench/results/*.json give: run `make docs` and commit it",
        bench::PAGE
    );
}

#[test]
fn every_workspace_crate_and_binary_is_in_the_crate_table() {
    let root = repo_root();
    let workspace = crates::workspace(&root).unwrap_or_else(|e| panic!("{e}"));
    assert!(workspace.len() > 10, "cargo metadata listed {workspace:?}");
    let page =
        std::fs::read_to_string(root.join(crates::TABLE_PAGE)).expect("the crate table page");
    let problems = crates::compare(&workspace, &crates::table(&page));
    assert!(
        problems.is_empty(),
        "the crate table is out of date:\n{}",
        problems.join("\n")
    );
    // Every directory under bins/ is a workspace package (a binary nobody builds is not shipped).
    for entry in std::fs::read_dir(root.join("bins"))
        .expect("bins/")
        .flatten()
    {
        let dir = format!("bins/{}", entry.file_name().to_string_lossy());
        assert!(
            workspace.values().any(|p| p.path == dir),
            "{dir} is not a workspace member"
        );
    }
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo_root();
    let src = root.join("docs/src");
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    markdown_under(&src, &mut files);
    let problems = links::check(&files, Some(&src));
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines; the manual lives in docs/"
    );
    for command in ["make demo", "make test"] {
        assert!(readme.contains(command), "README.md must show `{command}`");
    }
}

/// mdBook, the pinned version `make docs-tools` builds into the cache.
fn mdbook() -> PathBuf {
    if let Ok(path) = std::env::var("STRATUS_MDBOOK") {
        return PathBuf::from(path);
    }
    let cache = std::env::var("STRATUS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/stratus")
        });
    let makefile = std::fs::read_to_string(repo_root().join("Makefile")).expect("Makefile");
    let version = makefile
        .lines()
        .find_map(|l| l.strip_prefix("MDBOOK_VERSION := "))
        .expect("the Makefile pins MDBOOK_VERSION")
        .trim()
        .to_string();
    cache.join(format!("tools/mdbook-{version}/bin/mdbook"))
}

#[test]
fn mdbook_builds_the_book_without_a_warning() {
    let mdbook = mdbook();
    assert!(
        mdbook.exists(),
        "{} is missing: `make docs-tools` builds it (make test does)",
        mdbook.display()
    );
    let out_dir = std::env::temp_dir().join(format!("stratus-book-{}", std::process::id()));
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(repo_root().join("docs"))
        .arg("--dest-dir")
        .arg(&out_dir)
        .output()
        .expect("mdbook runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let built = out_dir.join("index.html").exists();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(out.status.success() && built, "mdbook build failed:\n{log}");
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        warnings.is_empty(),
        "mdbook warned:\n{}",
        warnings.join("\n")
    );
}
