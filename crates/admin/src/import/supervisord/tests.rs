//! The supervisord importer's rules, each on text, without reading or writing a file.

use super::values::{environment, split_command};
use super::*;

#[test]
fn a_command_splits_as_shlex_splits_it() {
    assert_eq!(
        split_command("php /var/www/artisan queue:work --sleep=3 'a b' \"c \\\"d\\\"\"").unwrap(),
        [
            "php",
            "/var/www/artisan",
            "queue:work",
            "--sleep=3",
            "a b",
            "c \"d\""
        ]
    );
    assert!(split_command("php 'open").is_err());
}

#[test]
fn environment_takes_quoted_and_bare_values() {
    assert_eq!(
        environment("A=\"1,2\",B=x, C='y z'").unwrap(),
        [
            ("A".to_owned(), "1,2".to_owned()),
            ("B".to_owned(), "x".to_owned()),
            ("C".to_owned(), "y z".to_owned())
        ]
    );
    assert!(environment("A").is_err());
    assert!(environment("A=\"open").is_err());
}

#[test]
fn configparser_lines_comments_and_continuations() {
    let text = "; comment\n[program:q]\ncommand = php artisan ; inline\n  --tries=3\n\
                numprocs: 2\nbogus\n";
    let (sections, errors) = parse("f.conf", text);
    assert_eq!(sections.len(), 1);
    assert_eq!(sections[0].entries[0].value, "php artisan\n--tries=3");
    assert_eq!(sections[0].entries[1].key, "numprocs");
    assert_eq!(sections[0].entries[1].value, "2");
    assert_eq!(
        errors,
        [(
            6,
            "neither a [section], a key = value nor a comment".to_owned()
        )]
    );
}

#[test]
fn a_program_maps_to_a_background_pool_with_its_notes() {
    let text = "[program:worker]\ncommand=/bin/sh -c 'sleep 1000'\nnumprocs=3\n\
                stopsignal=QUIT\nstopwaitsecs=30\nautorestart=false\n\
                environment=APP_ENV=\"production\"\n";
    let (sections, _) = parse("w.conf", text);
    let import = map(
        &Read {
            sections,
            errors: Vec::new(),
        },
        &Context::default(),
    );
    let (name, doc) = &import.pools[0];
    assert_eq!(name, "worker");
    assert_eq!(doc.get("pm", "max_children"), Some(&Value::Int(3)));
    assert_eq!(doc.get("program", "stop_signal"), Some(&Value::str("QUIT")));
    assert_eq!(doc.get("program", "stop_timeout"), Some(&Value::str("30s")));
    assert_eq!(doc.get("env", "APP_ENV"), Some(&Value::str("production")));
    let notes: Vec<String> = import.report.iter().map(ToString::to_string).collect();
    assert_eq!(
        notes,
        [
            "w.conf:6: autorestart = false: drover restarts every copy that exits; a \
          one-shot command has no equivalent"
        ]
    );
}

/// The import of `files` (name, text), read in order as one configuration.
fn import_with(files: &[(&str, &str)], context: &Context) -> Import {
    let mut read = Read::default();
    for (file, text) in files {
        let (sections, _) = parse(file, text);
        read.sections.extend(sections);
    }
    map(&read, context)
}

fn import(files: &[(&str, &str)]) -> Import {
    import_with(files, &Context::default())
}

fn pool<'i>(import: &'i Import, name: &str) -> &'i Doc {
    let found = import.pools.iter().find(|(n, _)| n == name);
    &found
        .unwrap_or_else(|| panic!("no pool {name}: {import:#?}"))
        .1
}

fn command(import: &Import, name: &str) -> Option<Vec<String>> {
    match pool(import, name).get("program", "command") {
        Some(Value::Strs(argv)) => Some(argv.clone()),
        _ => None,
    }
}

/// The note at `place` (FILE:LINE), as `setting: why`.
fn note(import: &Import, place: &str) -> String {
    let found = import.report.iter().find(|n| n.place == place);
    let found = found.unwrap_or_else(|| panic!("no note at {place}: {:#?}", import.report));
    format!("{}: {}", found.setting, found.why)
}

#[test]
fn a_program_name_that_is_not_a_plain_file_name_refuses_the_import() {
    let import = import(&[
        (
            "a.conf",
            "[program:ok]\ncommand=/bin/true\n[program:/abs/x]\ncommand=/bin/true\n",
        ),
        (
            "conf.d/b.conf",
            "[program:../../x]\ncommand=/bin/true\n[program:./a]\ncommand=/bin/true\n\
             [program:.hidden]\ncommand=x\n[program:]\ncommand=x\n[program:a\tb]\ncommand=x\n",
        ),
    ]);
    let refused: Vec<(&str, &str)> = import
        .refused
        .iter()
        .map(|n| (n.place.as_str(), n.setting.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            ("a.conf:3", "[program:/abs/x]"),
            ("conf.d/b.conf:1", "[program:../../x]"),
            ("conf.d/b.conf:3", "[program:./a]"),
            ("conf.d/b.conf:5", "[program:.hidden]"),
            ("conf.d/b.conf:7", "[program:]"),
            ("conf.d/b.conf:9", "[program:a\tb]"),
        ]
    );
    for note in &import.refused {
        assert!(
            note.why.contains("[A-Za-z0-9_.-]+") && note.why.contains("nothing was written"),
            "{note}"
        );
    }
}

#[test]
fn two_sections_for_one_pool_name_refuse_the_import_and_one_name_merges() {
    let import = import(&[
        ("a.conf", "[program:a]\ncommand=/bin/one\nnumprocs=2\n"),
        (
            "b.conf",
            "[program: a ]\ncommand=/bin/two\n[program:a]\ncommand=/bin/three\n",
        ),
    ]);
    assert_eq!(import.refused.len(), 1, "{:#?}", import.refused);
    assert_eq!(import.refused[0].place, "b.conf:1");
    assert!(
        import.refused[0].why.contains("a.conf:1"),
        "{}",
        import.refused[0]
    );
    // The second [program:a] is read into the first, as configparser reads it.
    assert_eq!(command(&import, "a").unwrap(), ["/bin/three"]);
    assert_eq!(
        pool(&import, "a").get("pm", "max_children"),
        Some(&Value::Int(2))
    );
    assert!(note(&import, "b.conf:3").contains("read into the [program:a] of a.conf:1"));
}

#[test]
fn an_inline_comment_starts_at_a_semicolon_or_hash_after_whitespace() {
    let text = "[program:q] ; the queue\ncommand=php artisan #comment\n  --tries=3 ;more\n\
                directory=/srv/a;b#c\nuser=www # x ; y\n";
    let (sections, errors) = parse("f.conf", text);
    assert_eq!(errors, []);
    assert_eq!(sections[0].name, "program:q");
    let values: Vec<&str> = sections[0]
        .entries
        .iter()
        .map(|e| e.value.as_str())
        .collect();
    assert_eq!(values, ["php artisan\n--tries=3", "/srv/a;b#c", "www"]);
}

#[test]
fn percent_expansions_are_made_as_supervisord_makes_them() {
    let context = Context {
        env: [("HOME".to_owned(), "/root".to_owned())].into(),
        host: "box".into(),
    };
    let text = "[group:jobs]\nprograms=w\n[program:w]\n\
                command=/bin/w --n=%(process_num)02d --of=%(numprocs)d %(program_name)s \
                %(group_name)s %(host_node_name)s 100%% %(ENV_HOME)s %(here)s\n";
    let import = import_with(&[("/etc/supervisor/w.conf", text)], &context);
    assert_eq!(
        command(&import, "w").unwrap(),
        [
            "/bin/w",
            "--n=00",
            "--of=1",
            "w",
            "jobs",
            "box",
            "100%",
            "/root",
            "/etc/supervisor"
        ]
    );
    // What came from drover import's own environment is reported.
    assert!(
        note(&import, "/etc/supervisor/w.conf:4")
            .contains("%(ENV_HOME)s expanded from the environment of drover import")
    );
}

#[test]
fn an_expansion_that_cannot_be_made_is_reported_and_its_key_not_written() {
    let cases = [
        (
            "command=/bin/w --n=%(process_num)s\nnumprocs=4\n",
            "differs in each of the numprocs = 4 copies",
        ),
        (
            "command=/bin/w %(ENV_DROVER_UNSET)s\n",
            "DROVER_UNSET is not set",
        ),
        (
            "command=/bin/w %(nope)s\n",
            "%(nope)s is not a name supervisord expands",
        ),
        ("command=/bin/w 100%\n", "neither %% nor %(name)s"),
        ("command=/bin/w %(program_name)d\n", "takes a number"),
    ];
    for (body, why) in cases {
        let import = import(&[("w.conf", &format!("[program:w]\n{body}"))]);
        assert_eq!(command(&import, "w"), None, "{body}");
        let found = note(&import, "w.conf:2");
        assert!(
            found.contains(why) && found.contains("command not written"),
            "{body}: {found}"
        );
    }
}

#[test]
fn environment_values_expand_and_name_env_for_the_command() {
    let text = "[supervisord]\nenvironment=SHARED=\"s\",APP=\"from-supervisord\"\n\
                [program:w]\nenvironment=APP=\"%(program_name)s\",N=\"%(process_num)d\"\n\
                command=/bin/w %(ENV_APP)s %(ENV_SHARED)s\ndirectory=/srv/%(ENV_APP)s\n";
    let import = import(&[("w.conf", text)]);
    let doc = pool(&import, "w");
    assert_eq!(doc.get("env", "SHARED"), Some(&Value::str("s")));
    assert_eq!(doc.get("env", "APP"), Some(&Value::str("w")));
    assert_eq!(doc.get("env", "N"), Some(&Value::str("0")));
    assert_eq!(doc.get("", "clear_env"), Some(&Value::Bool(false)));
    assert_eq!(command(&import, "w").unwrap(), ["/bin/w", "w", "s"]);
    assert_eq!(doc.get("", "chdir"), Some(&Value::str("/srv/w")));
}

#[test]
fn numprocs_past_the_bound_is_refused_and_max_children_not_written() {
    let import = import(&[("w.conf", "[program:w]\ncommand=/bin/w\nnumprocs=100000\n")]);
    assert_eq!(pool(&import, "w").get("pm", "max_children"), None);
    let found = note(&import, "w.conf:3");
    assert!(
        found.contains("100000 copies, more than the 1024"),
        "{found}"
    );
    let import = import_one_copies(1024);
    assert_eq!(
        pool(&import, "w").get("pm", "max_children"),
        Some(&Value::Int(1024))
    );
}

fn import_one_copies(n: i64) -> Import {
    let text = format!("[program:w]\ncommand=/bin/w\nnumprocs={n}\nprocess_name=%(process_num)s\n");
    import(&[("w.conf", &text)])
}

#[test]
fn a_group_name_supervisord_refuses_refuses_the_import() {
    let import = import(&[(
        "g.conf",
        "[group:a/b]\nprograms=w\n[program:w]\ncommand=/bin/w\n",
    )]);
    assert_eq!(import.refused.len(), 1);
    assert_eq!(import.refused[0].place, "g.conf:1");
}

#[test]
fn an_include_loop_is_read_once_and_a_nested_include_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    // `sub` is the folder itself: `sub/*.conf` names a.conf again, and again, ...
    std::os::unix::fs::symlink(".", dir.path().join("sub")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "a.conf",
        "[include]\nfiles = sub/*.conf\n[program:a]\ncommand=/bin/a\n",
    );
    write(
        "b.conf",
        "[include]\nfiles = %(here)s/*.conf\n[program:b]\ncommand=/bin/b\n",
    );
    let read = read(&[dir.path().join("a.conf")], &Context::default()).unwrap();
    let names: Vec<&str> = read.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["include", "program:a", "include", "program:b"]);
    assert_eq!(read.errors.len(), 1, "{:#?}", read.errors);
    assert!(
        read.errors[0].why.contains("not followed"),
        "{}",
        read.errors[0]
    );
    assert!(
        read.errors[0].place.ends_with("sub/b.conf:2"),
        "{}",
        read.errors[0]
    );
}
