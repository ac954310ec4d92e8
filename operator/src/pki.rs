//! The cluster's agent PKI: a CA per GlusterCluster, the agents' serving certificate and the
//! operator's client certificate, re-issued well before they expire.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("the stored certificate cannot be read ({0}); delete the Secret to have it re-issued")]
    Parse(String),
}

/// A PEM certificate and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
    /// Both ends of a connection: gluster nodes serve bricks and glusterd, and connect to
    /// each other (peers, self-heal) with the same certificate.
    Peer,
}

pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
pub const LEAF_VALIDITY: Duration = Duration::from_secs(90 * 24 * 3600);

/// A certificate authority that can sign leaves.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: CertKey,
}

impl Ca {
    pub fn generate(common_name: &str, now: SystemTime) -> Result<Self, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.not_before = now.into();
        params.not_after = (now + CA_VALIDITY).into();
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        let pem = CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        Ok(Self {
            issuer: Issuer::new(params, key),
            pem,
        })
    }

    pub fn from_pem(pem: &CertKey) -> Result<Self, PkiError> {
        let key = KeyPair::from_pem(&pem.key_pem).map_err(|e| PkiError::Parse(e.to_string()))?;
        let issuer = Issuer::from_ca_cert_pem(&pem.cert_pem, key)
            .map_err(|e| PkiError::Parse(e.to_string()))?;
        Ok(Self {
            issuer,
            pem: pem.clone(),
        })
    }

    pub fn pem(&self) -> &CertKey {
        &self.pem
    }

    /// A leaf valid from `now` for [`LEAF_VALIDITY`], for the given DNS names.
    pub fn issue(
        &self,
        common_name: &str,
        names: &[String],
        usage: Usage,
        now: SystemTime,
    ) -> Result<CertKey, PkiError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = match usage {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::Peer => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        };
        params.not_before = now.into();
        params.not_after = (now + LEAF_VALIDITY).into();
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The validity window of a PEM certificate.
pub fn validity(cert_pem: &str) -> Result<(SystemTime, SystemTime), PkiError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| PkiError::Parse(e.to_string()))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| PkiError::Parse(e.to_string()))?;
    let v = cert.validity();
    let at = |t: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
    Ok((at(v.not_before.timestamp()), at(v.not_after.timestamp())))
}

/// When a PEM certificate expires, in Unix seconds (for the expiry metric).
pub fn expiry_unix(cert_pem: &str) -> Option<i64> {
    let (_, until) = validity(cert_pem).ok()?;
    until
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// Renew once less than a third of the validity is left, so a missed reconcile or two never
/// lets a certificate lapse.
pub fn needs_renewal(cert_pem: &str, now: SystemTime) -> bool {
    match validity(cert_pem) {
        Ok((from, until)) => {
            let total = until.duration_since(from).unwrap_or_default();
            match until.duration_since(now) {
                Ok(left) => left < total / 3,
                Err(_) => true,
            }
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_leaves_and_reloads_the_ca() {
        let now = SystemTime::now();
        let ca = Ca::generate("test", now).unwrap();
        let reloaded = Ca::from_pem(ca.pem()).unwrap();
        let leaf = reloaded
            .issue("agent", &["agent.example".into()], Usage::Server, now)
            .unwrap();
        let (from, until) = validity(&leaf.cert_pem).unwrap();
        let days = until.duration_since(from).unwrap().as_secs() / 86400;
        assert_eq!(days, 90);
        assert!(!needs_renewal(&leaf.cert_pem, now));
        assert!(!needs_renewal(
            &leaf.cert_pem,
            now + Duration::from_secs(59 * 86400)
        ));
        assert!(needs_renewal(
            &leaf.cert_pem,
            now + Duration::from_secs(61 * 86400)
        ));
        assert!(needs_renewal(
            &leaf.cert_pem,
            now + Duration::from_secs(91 * 86400)
        ));
        assert!(needs_renewal("not a certificate", now));
        assert!(!needs_renewal(
            &ca.pem().cert_pem,
            now + Duration::from_secs(365 * 86400)
        ));
    }

    #[test]
    fn a_bad_stored_ca_is_a_clear_error() {
        let err = Ca::from_pem(&CertKey {
            cert_pem: "x".into(),
            key_pem: "y".into(),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("delete the Secret"), "{err}");
    }
}
