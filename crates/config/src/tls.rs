//! An HTTP pool's TLS keys (`certfile`, `keyfile`, `ca_certs`, `cert_reqs`, `ciphers`,
//! `ssl_version`): the files read by the master at load, checked by building the workers'
//! rustls config.

use std::path::Path;

use super::model::{Tls, TlsGiven};
use super::value::Table;

/// `certfile` and the TLS keys: the files are read now (by the master, as root when it
/// runs as root: the pool's user needs no right on them), and checked by building the
/// workers' very rustls config, so that an unreadable file, one without PEM, a key that is
/// not the certificate's, an unknown suite or version is refused at load (and by
/// `drover -t`, and on a reload, which keeps the running pools).
pub(super) fn parse(root: &Table<'_, '_>, base: &Path) -> Option<Option<Tls>> {
    use drover_proto::tls::{self, CertReqs, MinVersion, Settings};
    let certfile = root.path_buf("certfile", base).optional();
    let keyfile = root.path_buf("keyfile", base).optional();
    let ca_certs = root.path_buf("ca_certs", base).optional();
    let cert_reqs: Option<CertReqs> = root.value("cert_reqs");
    let min_version = root
        .parse("ssl_version", MinVersion::parse)
        .or_else(MinVersion::default);
    let ciphers = root.strings("ciphers").optional();
    let (certfile, keyfile, ca_certs, cert_reqs, min_version, ciphers) = (
        certfile?,
        keyfile?,
        ca_certs?,
        cert_reqs?,
        min_version?,
        ciphers?,
    );
    let Some(certfile) = certfile else {
        let mut valid = true;
        for key in ["keyfile", "ca_certs", "cert_reqs", "ciphers", "ssl_version"] {
            if root.contains(key) {
                root.fail(
                    key,
                    "only with certfile (the listener speaks TLS only with a certificate)",
                );
                valid = false;
            }
        }
        return valid.then_some(None);
    };
    if cert_reqs != CertReqs::None && ca_certs.is_none() {
        root.fail(
            "cert_reqs",
            format!(
                "\"{}\" needs ca_certs: the authorities client certificates are checked against",
                cert_reqs.name()
            ),
        );
        return None;
    }
    let read = |key: &str, path: &Path| match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(err) => {
            root.fail(key, format!("cannot read {}: {err}", path.display()));
            None
        }
    };
    let cert = read("certfile", &certfile);
    let key = match &keyfile {
        Some(path) => read("keyfile", path),
        None => cert.clone(),
    };
    let ca = match &ca_certs {
        Some(path) => Some(read("ca_certs", path)?),
        None => None,
    };
    let material = tls::Material {
        cert: cert?,
        key: key?,
        ca,
    };
    let settings = Settings {
        cert_reqs,
        ciphers: ciphers
            .unwrap_or_default()
            .into_iter()
            .map(|(name, _)| name.to_owned())
            .collect(),
        min_version,
    };
    // Every key of the TLS is read here: which apply, and the files, depend on certfile.
    let tls = Tls::read(
        root,
        TlsGiven {
            certfile: Some(certfile),
            keyfile: Some(keyfile),
            ca_certs: Some(ca_certs),
            settings: Some(settings),
            material: Some(material),
        },
    )?;
    match tls::server_config(&tls.material, &tls.settings) {
        Ok(_) => Some(Some(tls)),
        Err(problem) => {
            refuse_tls(root, &tls, problem);
            None
        }
    }
}

/// Reports what rustls refused in `tls`, at the key of the file (or setting) at fault.
fn refuse_tls(root: &Table<'_, '_>, tls: &Tls, problem: drover_proto::tls::Problem) {
    use drover_proto::tls::Part;
    let certfile = &tls.certfile;
    // A part whose key is not written: the key is certfile's (keyfile unset).
    let key = match problem.part {
        Part::Keyfile if tls.keyfile.is_none() => "certfile",
        part => part.key(),
    };
    let file = match problem.part {
        Part::Certfile => Some(certfile),
        Part::Keyfile => Some(tls.keyfile.as_ref().unwrap_or(certfile)),
        Part::CaCerts => tls.ca_certs.as_ref(),
        Part::Ciphers => None,
    };
    let reason = match (problem.part, file) {
        (Part::Keyfile, Some(file)) => format!(
            "{}: {} (certfile {})",
            file.display(),
            problem.reason,
            certfile.display()
        ),
        (_, Some(file)) => format!("{}: {}", file.display(), problem.reason),
        (_, None) => problem.reason,
    };
    root.fail(key, reason);
}
