//! Just enough Markdown for the checks: the pages, their prose lines (outside fenced code),
//! their fenced blocks, and the anchors GitHub gives their headings.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, with their text, README first.
pub fn pages() -> Vec<(PathBuf, String)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    paths.sort();
    paths.insert(0, root().join("README.md"));
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            (path, text)
        })
        .collect()
}

/// One fenced block: its info string (`toml`, `sh`, or empty), its text, and the 1-based line
/// of its opening fence.
pub struct Block {
    pub info: String,
    pub text: String,
    pub line: usize,
}

/// The lines outside fenced blocks, with their 1-based numbers, and the fenced blocks.
pub fn split(text: &str) -> (Vec<(usize, &str)>, Vec<Block>) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    text: String::new(),
                    line: index + 1,
                });
            }
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some(block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => prose.push((index + 1, line)),
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    (prose, blocks)
}

/// A heading's text, when `line` is one (`## Text`).
pub fn heading(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    let rest = line.get(hashes..)?;
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| rest.trim())
}

/// GitHub's anchor for a heading: lower case, every character but letters, digits, spaces,
/// `-` and `_` dropped, spaces made `-` (so "`set POOL KEY=VALUE...`" is `set-pool-keyvalue`).
pub fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a page: its headings' (a repeated one gets `-1`, `-2`, ... as on GitHub)
/// and the `<a id="...">` or `<a name="...">` it writes.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (_, line) in split(text).0 {
        if let Some(heading) = heading(line) {
            let base = slug(heading);
            let mut anchor = base.clone();
            let mut n = 0;
            while found.contains(&anchor) {
                n += 1;
                anchor = format!("{base}-{n}");
            }
            found.insert(anchor);
        }
        for attr in ["<a id=\"", "<a name=\""] {
            for (at, _) in line.match_indices(attr) {
                let rest = &line[at + attr.len()..];
                found.extend(rest.split('"').next().map(str::to_string));
            }
        }
    }
    found
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(slug("`set POOL KEY=VALUE...`"), "set-pool-keyvalue");
    assert_eq!(
        slug("Through the pool's own socket"),
        "through-the-pools-own-socket"
    );
    assert_eq!(
        slug("Checking the configuration: `drover -t`"),
        "checking-the-configuration-drover--t"
    );
    let text = "# A\n## Fields\n```\n## Not a heading\n```\n## Fields\n<a id=\"warm-up\"></a>\n";
    let anchors: Vec<String> = anchors(text).into_iter().collect();
    assert_eq!(anchors, ["a", "fields", "fields-1", "warm-up"]);
}
