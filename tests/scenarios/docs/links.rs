//! Every relative link of the manual names a file that exists, and every `#anchor` one of
//! the target page's anchors, as GitHub renders them. Links to other sites are not fetched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::markdown::{anchors, pages, split};

/// The targets of the inline links on a line: `[label](target)`.
fn targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let end = rest.find([')', ' '])?;
            Some(&rest[..end])
        })
        .collect()
}

/// Why `target`, written on the page at `page`, does not resolve; `None` when it does.
fn broken(page: &Path, target: &str, known: &BTreeMap<PathBuf, Vec<String>>) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent()?.join(path)
    };
    let Ok(file) = file.canonicalize() else {
        return Some(format!("{} does not exist", file.display()));
    };
    if anchor.is_empty() {
        return None;
    }
    let Some(anchors) = known.get(&file) else {
        return Some(format!(
            "#{anchor}: {} is not a page of the manual",
            file.display()
        ));
    };
    (!anchors.iter().any(|a| a == anchor)).then(|| {
        format!(
            "#{anchor} is no anchor of {} (it has: {})",
            file.display(),
            anchors.join(", ")
        )
    })
}

#[test]
fn every_link_and_anchor_resolves() {
    let pages = pages();
    let known: BTreeMap<PathBuf, Vec<String>> = pages
        .iter()
        .map(|(path, text)| {
            let path = path.canonicalize().expect("a page's path");
            (path, anchors(text).into_iter().collect())
        })
        .collect();
    let mut errors = Vec::new();
    let mut checked = 0;
    for (page, text) in &pages {
        for (line, prose) in split(text).0 {
            for target in targets(prose) {
                checked += 1;
                if let Some(why) = broken(page, target, &known) {
                    errors.push(format!("{}:{line}: ({target}): {why}", page.display()));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser blind?"
    );
    assert!(errors.is_empty(), "broken links:\n{}", errors.join("\n"));
}

#[test]
fn a_broken_link_is_seen() {
    let page = super::markdown::root().join("README.md");
    let known = BTreeMap::from([(
        page.canonicalize().expect("README.md"),
        vec!["quick-start".to_string()],
    )]);
    assert_eq!(targets("see [a](#b) and [`c`](d.md#e)."), ["#b", "d.md#e"]);
    assert!(broken(&page, "#quick-start", &known).is_none());
    assert!(broken(&page, "#quick-stat", &known).is_some());
    assert!(broken(&page, "docs/nothing-here.md", &known).is_some());
    assert!(broken(&page, "https://example.com/#x", &known).is_none());
}
