//! TLS on an HTTP pool's listener, both sides of it: the master reads the pool's
//! `certfile`, `keyfile` and `ca_certs` (as root, as nginx does, so that the key may stay
//! readable by root alone) and checks them by building the very [`ServerConfig`] the
//! workers will use ([`server_config`]); it hands the bytes to the zygote in a sealed
//! memfd at [`crate::zygote::TLS_FD`] ([`Material::encode`]), never on the command line nor
//! in the environment; the zygote reads them once ([`Material::decode`]), builds the same
//! config, and its workers inherit it.
//!
//! rustls with ring: TLS 1.2 and 1.3 only, HTTP/1.1 over ALPN.

use std::io;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// `cert_reqs`: whether clients present a certificate (gunicorn's, after Python's
/// `ssl.CERT_NONE`, `CERT_OPTIONAL`, `CERT_REQUIRED`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CertReqs {
    /// No certificate is asked for.
    #[default]
    None,
    /// One is asked for; a client may send none, but one it sends must verify.
    Optional,
    /// A client without a certificate that verifies against `ca_certs` is refused.
    Required,
}

impl CertReqs {
    pub fn name(self) -> &'static str {
        match self {
            CertReqs::None => "none",
            CertReqs::Optional => "optional",
            CertReqs::Required => "required",
        }
    }
}

/// `ssl_version`: the lowest TLS version taken (rustls speaks no older one than 1.2).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinVersion {
    #[default]
    #[serde(rename = "TLSv1.2")]
    Tls12,
    #[serde(rename = "TLSv1.3")]
    Tls13,
}

impl MinVersion {
    pub fn name(self) -> &'static str {
        match self {
            MinVersion::Tls12 => "TLSv1.2",
            MinVersion::Tls13 => "TLSv1.3",
        }
    }

    /// `ssl_version` as written: gunicorn's spellings (`TLSv1_2`) too. Older versions are
    /// refused with the reason.
    pub fn parse(written: &str) -> Result<MinVersion, String> {
        match written {
            "TLSv1.2" | "TLSv1_2" => Ok(MinVersion::Tls12),
            "TLSv1.3" | "TLSv1_3" => Ok(MinVersion::Tls13),
            "TLSv1" | "TLSv1.0" | "TLSv1_0" | "TLSv1.1" | "TLSv1_1" | "SSLv2" | "SSLv3"
            | "SSLv23" => Err(format!(
                "{written} is not spoken: rustls takes TLS 1.2 and 1.3 only (write \"TLSv1.2\" \
                 or \"TLSv1.3\", the lowest version taken)"
            )),
            _ => Err("must be \"TLSv1.2\" or \"TLSv1.3\" (the lowest version taken)".into()),
        }
    }
}

/// The pool's TLS settings besides the files.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    pub cert_reqs: CertReqs,
    /// `ciphers`: the suites offered, by their IANA names; empty: rustls's defaults.
    pub ciphers: Vec<String>,
    pub min_version: MinVersion,
}

/// What the files hold: PEM text, as read.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Material {
    /// `certfile`: the server's certificate, then its chain.
    pub cert: Vec<u8>,
    /// `keyfile` (or the key in `certfile` when there is no `keyfile`).
    pub key: Vec<u8>,
    /// `ca_certs`: the authorities a client certificate must chain to.
    pub ca: Option<Vec<u8>>,
}

/// The key is never printed (`drover -t`, a panic, a debug log).
impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("cert", &format_args!("{} bytes", self.cert.len()))
            .field("key", &format_args!("{} bytes", self.key.len()))
            .field("ca", &self.ca.as_ref().map(Vec::len))
            .finish()
    }
}

/// Which of the pool's TLS keys a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Certfile,
    Keyfile,
    CaCerts,
    Ciphers,
}

impl Part {
    pub fn key(self) -> &'static str {
        match self {
            Part::Certfile => "certfile",
            Part::Keyfile => "keyfile",
            Part::CaCerts => "ca_certs",
            Part::Ciphers => "ciphers",
        }
    }
}

/// A setting the server config cannot be built from, with the key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub part: Part,
    pub reason: String,
}

fn problem(part: Part, reason: impl Into<String>) -> Problem {
    Problem {
        part,
        reason: reason.into(),
    }
}

/// The protocols taken over ALPN: HTTP/1.1 (and 1.0, which curl's `--http1.0` offers
/// alone). A client that offers ALPN without either (h2 alone) gets rustls's
/// `no_application_protocol` alert and no connection; one that offers no ALPN is served
/// HTTP/1.1.
pub const ALPN: &[&[u8]] = &[b"http/1.1", b"http/1.0"];

fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// The IANA names of the suites `ciphers` may name.
pub fn suite_names() -> Vec<String> {
    provider()
        .cipher_suites
        .iter()
        .map(|s| format!("{:?}", s.suite()))
        .collect()
}

/// The suite named `name` (IANA, as rustls prints it: `TLS13_AES_128_GCM_SHA256`,
/// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`).
pub fn suite(name: &str) -> Option<SupportedCipherSuite> {
    provider()
        .cipher_suites
        .into_iter()
        .find(|s| format!("{:?}", s.suite()) == name)
}

/// The certificates in a PEM text; an error says what is wrong with it.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    match certs {
        Ok(certs) if certs.is_empty() => {
            Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into())
        }
        Ok(certs) => Ok(certs),
        Err(err) => Err(format!("not a PEM certificate file: {err}")),
    }
}

/// The private key in a PEM text (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(key) => Ok(key),
        Err(_) if contains(pem, b"ENCRYPTED PRIVATE KEY") || contains(pem, b"Proc-Type: 4,ENCRYPTED") => Err(
            "the key is encrypted and drover asks for no passphrase (decrypt it: openssl pkey -in KEY -out KEY.plain)"
                .into(),
        ),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => {
            Err("holds no PEM private key (-----BEGIN PRIVATE KEY-----)".into())
        }
        Err(err) => Err(format!("not a PEM private key: {err}")),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The server config the workers use: the certificate and key, client certificates as
/// `cert_reqs` says (against `ca_certs`), the suites and versions, ALPN http/1.1.
pub fn server_config(material: &Material, settings: &Settings) -> Result<ServerConfig, Problem> {
    let mut provider = provider();
    if !settings.ciphers.is_empty() {
        let mut suites = Vec::with_capacity(settings.ciphers.len());
        for name in &settings.ciphers {
            match suite(name) {
                Some(s) => suites.push(s),
                None => {
                    return Err(problem(
                        Part::Ciphers,
                        format!(
                            "{name:?} is not a cipher suite rustls offers; it offers {}",
                            suite_names().join(", ")
                        ),
                    ));
                }
            }
        }
        provider.cipher_suites = suites;
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match settings.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    if !provider
        .cipher_suites
        .iter()
        .any(|s| versions.iter().any(|v| s.version() == *v))
    {
        return Err(problem(
            Part::Ciphers,
            format!(
                "no suite listed is of a version taken (ssl_version = \"{}\")",
                settings.min_version.name()
            ),
        ));
    }
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| problem(Part::Ciphers, e.to_string()))?;
    let builder = match settings.cert_reqs {
        CertReqs::None => builder.with_no_client_auth(),
        reqs => {
            let Some(ca) = &material.ca else {
                return Err(problem(
                    Part::CaCerts,
                    format!(
                        "missing: cert_reqs = \"{}\" verifies client certificates against ca_certs",
                        reqs.name()
                    ),
                ));
            };
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca).map_err(|e| problem(Part::CaCerts, e))? {
                roots
                    .add(cert)
                    .map_err(|e| problem(Part::CaCerts, format!("not a CA certificate: {e}")))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if reqs == CertReqs::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| problem(Part::CaCerts, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let certs = certificates(&material.cert).map_err(|e| problem(Part::Certfile, e))?;
    let key = private_key(&material.key).map_err(|e| problem(Part::Keyfile, e))?;
    let mut config = builder.with_single_cert(certs, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => problem(
            Part::Keyfile,
            "the key does not match certfile's certificate (its public key is another)",
        ),
        other => problem(Part::Keyfile, format!("cannot use the key: {other}")),
    })?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

impl Material {
    /// The bytes for the zygote's memfd: three length-prefixed parts (cert, key, CA; the
    /// CA's length is `u64::MAX` when there is none).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.cert.len() + self.key.len() + 32);
        for part in [Some(&self.cert), Some(&self.key), self.ca.as_ref()] {
            match part {
                Some(bytes) => {
                    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                    out.extend_from_slice(bytes);
                }
                None => out.extend_from_slice(&u64::MAX.to_le_bytes()),
            }
        }
        out
    }

    pub fn decode(mut bytes: &[u8]) -> io::Result<Material> {
        let mut part = || -> io::Result<Option<Vec<u8>>> {
            let bad = || io::Error::new(io::ErrorKind::InvalidData, "a truncated TLS memfd");
            let (len, rest) = bytes.split_at_checked(8).ok_or_else(bad)?;
            let len = u64::from_le_bytes(len.try_into().map_err(|_| bad())?);
            if len == u64::MAX {
                bytes = rest;
                return Ok(None);
            }
            let (part, rest) = rest.split_at_checked(len as usize).ok_or_else(bad)?;
            bytes = rest;
            Ok(Some(part.to_vec()))
        };
        let cert = part()?.unwrap_or_default();
        let key = part()?.unwrap_or_default();
        let ca = part()?;
        Ok(Material { cert, key, ca })
    }

    /// A sealed memfd holding [`Self::encode`]'s bytes, for the zygote: nothing can write it
    /// after this, and it closes on exec (the spawn moves it to [`crate::zygote::TLS_FD`]).
    pub fn memfd(&self) -> io::Result<std::os::fd::OwnedFd> {
        crate::sealed_memfd(c"drover-tls", &self.encode())
    }

    /// The zygote's side: reads the memfd at `fd` whole from its start (each zygote of
    /// the pool gets the same one) and closes it.
    pub fn from_fd(fd: i32) -> io::Result<Material> {
        Material::decode(&crate::read_memfd(fd)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_crosses_the_memfd_whole() {
        for ca in [None, Some(b"ca".to_vec())] {
            let material = Material {
                cert: b"cert".to_vec(),
                key: b"key\0\xff".to_vec(),
                ca,
            };
            assert_eq!(Material::decode(&material.encode()).unwrap(), material);
        }
        assert!(Material::decode(&[1, 0]).is_err());
    }

    #[test]
    fn versions_older_than_tls_1_2_are_refused_with_the_reason() {
        assert_eq!(MinVersion::parse("TLSv1_3").unwrap(), MinVersion::Tls13);
        assert!(MinVersion::parse("TLSv1.1").unwrap_err().contains("rustls"));
        assert!(MinVersion::parse("tls").unwrap_err().contains("TLSv1.2"));
    }

    #[test]
    fn an_unknown_suite_is_named_with_the_known_ones() {
        assert!(suite("TLS13_AES_128_GCM_SHA256").is_some());
        let settings = Settings {
            ciphers: vec!["ECDHE-RSA-AES128-GCM-SHA256".into()],
            ..Settings::default()
        };
        let err = server_config(&Material::default(), &settings).unwrap_err();
        assert_eq!(err.part, Part::Ciphers);
        assert!(
            err.reason.contains("TLS13_AES_256_GCM_SHA384"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn a_file_without_pem_is_refused_saying_so() {
        assert!(
            certificates(b"hello")
                .unwrap_err()
                .contains("no PEM certificate")
        );
        assert!(
            private_key(b"hello")
                .unwrap_err()
                .contains("no PEM private key")
        );
    }
}
