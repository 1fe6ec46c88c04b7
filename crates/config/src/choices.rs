//! The enums of the choice keys ([`super::keys::Choice`]) that the typed model holds in
//! another form: a bool (`slowlog_format`, `protocol`, `worker_boot`), the runtime's own
//! data (`[php] runtime`), or a type of another crate (`cert_reqs`). The model's own enums
//! (`PmMode`, `LogLevel`, ...) declare their words in `model/`.

use drover_proto::tls::CertReqs;

use super::keys::choice;

/// `slowlog_format`: the model's `slowlog_json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlowlogFormat {
    Text,
    Json,
}

choice!(SlowlogFormat {
    Text = "text",
    Json = "json",
});

/// `protocol`: what the workers speak on `listen`; the model's `http` is set for HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    FastCgi,
    Http,
}

choice!(Protocol {
    FastCgi = "fastcgi",
    Http = "http",
});

/// `[php] runtime`: the program that runs the scripts (the model's `PhpRuntime`, with what
/// only that program takes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PhpProgram {
    Embed,
    Cgi,
}

choice!(PhpProgram {
    Embed = "embed",
    Cgi = "cgi",
} {
    const MEANINGS: &'static [&'static str] = &["drover-php", "php-cgi"];
});

/// `[php] worker_boot`: where a worker script boots (the model's `boot_in_zygote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkerBoot {
    Worker,
    Zygote,
}

choice!(WorkerBoot {
    Worker = "worker",
    Zygote = "zygote",
} {
    const MEANINGS: &'static [&'static str] = &[
        "each worker boots the script",
        "it boots once, and the workers are forked from it",
    ];
});

// gunicorn's `cert_reqs`, with Python's `ssl` names taken too.
choice!(CertReqs {
    None = "none",
    Optional = "optional",
    Required = "required",
} {
    const ALIASES: &'static [(&'static str, Self)] = &[
        ("CERT_NONE", CertReqs::None),
        ("CERT_OPTIONAL", CertReqs::Optional),
        ("CERT_REQUIRED", CertReqs::Required),
    ];
});

#[cfg(test)]
mod tests {
    use super::super::keys::{Choice, Default, KEYS, Type};
    use super::*;

    #[test]
    fn a_choice_is_read_by_its_words_and_aliases_and_refused_listing_them() {
        assert_eq!(CertReqs::from_name("CERT_REQUIRED"), Ok(CertReqs::Required));
        assert_eq!(CertReqs::Required.name(), "required");
        assert_eq!(
            CertReqs::from_name("yes"),
            Err("must be \"none\", \"optional\" or \"required\"".to_owned())
        );
        assert_eq!(
            PhpProgram::from_name("fpm"),
            Err("must be \"embed\" (drover-php) or \"cgi\" (php-cgi)".to_owned())
        );
    }

    /// A row's stated default is one of its words.
    #[test]
    fn every_choice_default_is_one_of_its_words() {
        for key in KEYS {
            if let (Type::Choice(names), Default::Value(text)) = (key.ty, key.default) {
                let word = text.trim_matches('"');
                assert!(names.contains(&word), "{}: {text}", key.path());
            }
        }
    }
}
