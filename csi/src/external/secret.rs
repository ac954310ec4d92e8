//! What a Secret says about a pool made by hand. Pure: every key is checked here, and a
//! refusal names it.

use std::collections::BTreeMap;

use gk_api::agents::AgentCredentials;
use gk_api::volume_id::EXTERNAL_POOL_SECRET_TYPE;

use crate::mount::MountSource;
use crate::node::mount_pods::GLUSTER_TLS_FILES;
use crate::params::ObjectKey;

/// A pool made by hand, as its Secret describes it.
#[derive(Clone)]
pub struct ExternalPool {
    /// The gluster volume whose directories become PVs.
    pub volume: String,
    /// Volfile servers clients mount from, in order.
    pub servers: Vec<String>,
    /// Brick agents started on the pool's servers, as host and port, in order of preference.
    pub agents: Vec<(String, u16)>,
    /// The CSI controller's client certificate for the agents, and the name their serving
    /// certificate carries.
    pub credentials: AgentCredentials,
    /// The Secret holds a gluster certificate (`glusterfs.pem`, `.key`, `.ca`) that clients
    /// present: the pool has I/O TLS (`client.ssl`).
    pub gluster_certificate: bool,
    /// Clients fetch their volfile over TLS (the pool's servers have `secure-access`).
    pub management_tls: bool,
}

/// Without the keys and certificates.
impl std::fmt::Debug for ExternalPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalPool")
            .field("volume", &self.volume)
            .field("servers", &self.servers)
            .field("agents", &self.agents)
            .field("server_name", &self.credentials.server_name)
            .field("gluster_certificate", &self.gluster_certificate)
            .field("management_tls", &self.management_tls)
            .finish()
    }
}

/// A key of the Secret that is missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("external pool Secret {secret}: {field}: {reason}")]
pub struct SecretError {
    pub secret: String,
    /// `type`, or `data.<key>`.
    pub field: String,
    pub reason: String,
}

/// The keys an external pool Secret may hold.
pub const KEYS: [&str; 11] = [
    "volume",
    "servers",
    "agents",
    "agentServerName",
    "ca.crt",
    "tls.crt",
    "tls.key",
    "glusterfs.pem",
    "glusterfs.key",
    "glusterfs.ca",
    "managementTLS",
];

/// The brick agent's port when `agents` gives none.
pub const DEFAULT_AGENT_PORT: u16 = gk_api::agents::AGENT_PORT;

impl ExternalPool {
    /// Reads the Secret `key` of type `type_` with `data`.
    pub fn parse(
        key: &ObjectKey,
        type_: Option<&str>,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Self, SecretError> {
        let bad = |field: &str, reason: String| SecretError {
            secret: key.to_string(),
            field: field.to_string(),
            reason,
        };
        if type_ != Some(EXTERNAL_POOL_SECRET_TYPE) {
            return Err(bad(
                "type",
                format!(
                    "is {:?}; an external pool's Secret has type {EXTERNAL_POOL_SECRET_TYPE}",
                    type_.unwrap_or("")
                ),
            ));
        }
        if let Some(k) = data.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(bad(
                &format!("data.{k}"),
                format!(
                    "is not a key of an external pool; known: {}",
                    KEYS.join(", ")
                ),
            ));
        }
        let text = |k: &str| -> Result<Option<String>, SecretError> {
            data.get(k)
                .map(|v| {
                    String::from_utf8(v.clone())
                        .map(|s| s.trim().to_string())
                        .map_err(|_| bad(&format!("data.{k}"), "is not UTF-8 text".into()))
                })
                .transpose()
        };
        let required = |k: &str, what: &str| -> Result<String, SecretError> {
            text(k)?
                .filter(|v| !v.is_empty())
                .ok_or_else(|| bad(&format!("data.{k}"), format!("is required: {what}")))
        };
        let volume = required("volume", "the gluster volume whose directories become PVs")?;
        gk_gluster::validate_volume_name(&volume).map_err(|e| bad("data.volume", e.to_string()))?;
        let servers: Vec<String> = required(
            "servers",
            "the volfile servers, comma-separated, such as gluster1,gluster2,gluster3",
        )?
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
        MountSource {
            servers: servers.clone(),
            volume: volume.clone(),
            subdir: None,
        }
        .unique_servers()
        .map_err(|e| bad("data.servers", e.to_string()))?;
        let agents = required(
            "agents",
            "the brick agents started on the pool's servers, comma-separated host or \
             host:port (port 24050 when none is given)",
        )?
        .split(',')
        .map(|a| agent_address(a.trim()).map_err(|e| bad("data.agents", e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
        let server_name = required(
            "agentServerName",
            "the DNS name the agents' serving certificates carry",
        )?;
        if !valid_host(&server_name) || server_name.parse::<std::net::IpAddr>().is_ok() {
            return Err(bad(
                "data.agentServerName",
                format!("{server_name:?} is not a DNS name"),
            ));
        }
        let pem = |k: &str, what: &str| -> Result<String, SecretError> {
            let v = required(k, what)?;
            if !v.starts_with("-----BEGIN ") {
                return Err(bad(&format!("data.{k}"), "is not PEM".into()));
            }
            Ok(v)
        };
        let credentials = AgentCredentials {
            ca_pem: pem("ca.crt", "the CA that signed the agents' certificates")?,
            cert_pem: pem(
                "tls.crt",
                "the CSI controller's client certificate for the agents",
            )?,
            key_pem: pem("tls.key", "the key of tls.crt")?,
            server_name,
        };
        let present: Vec<&str> = GLUSTER_TLS_FILES
            .into_iter()
            .filter(|f| data.contains_key(*f))
            .collect();
        let gluster_certificate = match present.len() {
            0 => false,
            3 => {
                for f in GLUSTER_TLS_FILES {
                    pem(f, "part of the gluster certificate")?;
                }
                true
            }
            _ => {
                let missing = GLUSTER_TLS_FILES
                    .into_iter()
                    .find(|f| !present.contains(f))
                    .unwrap_or_default();
                return Err(bad(
                    &format!("data.{missing}"),
                    "is required with the other gluster certificate files (glusterfs.pem, \
                     glusterfs.key and glusterfs.ca go together)"
                        .into(),
                ));
            }
        };
        let management_tls = match text("managementTLS")?.as_deref() {
            None => gluster_certificate,
            Some("true") if gluster_certificate => true,
            Some("true") => {
                return Err(bad(
                    "data.managementTLS",
                    "is true, but the Secret holds no gluster certificate (glusterfs.pem, \
                     glusterfs.key, glusterfs.ca) to present"
                        .into(),
                ))
            }
            Some("false") => false,
            Some(other) => {
                return Err(bad(
                    "data.managementTLS",
                    format!("{other:?} must be true or false"),
                ))
            }
        };
        Ok(Self {
            volume,
            servers,
            agents,
            credentials,
            gluster_certificate,
            management_tls,
        })
    }
}

/// A hostname or IPv4 address, as gluster takes them.
fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// What is wrong with an agent's address in an external pool's Secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentAddressError {
    #[error("{address:?}: {port:?} is not a port")]
    Port { address: String, port: String },
    #[error("{address:?}: {host:?} is not a hostname or IPv4 address")]
    Host { address: String, host: String },
}

/// `host` or `host:port`.
fn agent_address(a: &str) -> Result<(String, u16), AgentAddressError> {
    let (host, port) = match a.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| AgentAddressError::Port {
                    address: a.to_string(),
                    port: p.to_string(),
                })?,
        ),
        None => (a, DEFAULT_AGENT_PORT),
    };
    if !valid_host(host) {
        return Err(AgentAddressError::Host {
            address: a.to_string(),
            host: host.to_string(),
        });
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";

    fn key() -> ObjectKey {
        ObjectKey {
            namespace: "glusterkube-system".into(),
            name: "legacy".into(),
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        let mut d: BTreeMap<String, Vec<u8>> = [
            ("volume", "legacy"),
            ("servers", "gluster1, gluster2,10.0.0.3"),
            ("agents", "gluster1,gluster2:24060"),
            ("agentServerName", "agent.legacy.example"),
            ("ca.crt", PEM),
            ("tls.crt", PEM),
            ("tls.key", PEM),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
        for (k, v) in pairs {
            if v.is_empty() {
                d.remove(*k);
            } else {
                d.insert(k.to_string(), v.as_bytes().to_vec());
            }
        }
        d
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<ExternalPool, SecretError> {
        ExternalPool::parse(&key(), Some(EXTERNAL_POOL_SECRET_TYPE), &data(pairs))
    }

    fn field(pairs: &[(&str, &str)]) -> String {
        match parse(pairs) {
            Ok(_) => panic!("{pairs:?} was accepted"),
            Err(e) => e.field,
        }
    }

    #[test]
    fn a_pool_with_auth_allow_reachability() {
        let p = parse(&[]).unwrap();
        assert_eq!(p.volume, "legacy");
        assert_eq!(p.servers, ["gluster1", "gluster2", "10.0.0.3"]);
        assert_eq!(
            p.agents,
            [
                ("gluster1".to_string(), 24050),
                ("gluster2".to_string(), 24060)
            ]
        );
        assert_eq!(p.credentials.server_name, "agent.legacy.example");
        assert!(!p.gluster_certificate && !p.management_tls);
    }

    #[test]
    fn a_pool_with_its_own_gluster_certificate() {
        let tls = [
            ("glusterfs.pem", PEM),
            ("glusterfs.key", PEM),
            ("glusterfs.ca", PEM),
        ];
        let p = parse(&tls).unwrap();
        assert!(p.gluster_certificate && p.management_tls, "both by default");
        let mut io_only = tls.to_vec();
        io_only.push(("managementTLS", "false"));
        let p = parse(&io_only).unwrap();
        assert!(p.gluster_certificate && !p.management_tls);
    }

    #[test]
    fn every_bad_key_is_named() {
        for (pairs, named) in [
            (vec![("volume", "")], "data.volume"),
            (vec![("volume", "no/slash")], "data.volume"),
            (vec![("servers", "")], "data.servers"),
            (vec![("servers", "a,,b")], "data.servers"),
            (vec![("servers", "a b")], "data.servers"),
            (vec![("agents", "")], "data.agents"),
            (vec![("agents", "a:0")], "data.agents"),
            (vec![("agents", "a:http")], "data.agents"),
            (vec![("agents", "-a")], "data.agents"),
            (vec![("agentServerName", "")], "data.agentServerName"),
            (
                vec![("agentServerName", "10.0.0.1")],
                "data.agentServerName",
            ),
            (vec![("ca.crt", "")], "data.ca.crt"),
            (vec![("tls.crt", "not pem")], "data.tls.crt"),
            (vec![("tls.key", "")], "data.tls.key"),
            (vec![("glusterfs.pem", PEM)], "data.glusterfs.key"),
            (
                vec![
                    ("glusterfs.pem", PEM),
                    ("glusterfs.key", "x"),
                    ("glusterfs.ca", PEM),
                ],
                "data.glusterfs.key",
            ),
            (vec![("managementTLS", "true")], "data.managementTLS"),
            (vec![("managementTLS", "yes")], "data.managementTLS"),
            (vec![("server", "typo")], "data.server"),
        ] {
            assert_eq!(field(&pairs), named, "{pairs:?}");
        }
        let e = ExternalPool::parse(&key(), Some("Opaque"), &data(&[])).unwrap_err();
        assert_eq!(e.field, "type");
        assert!(e.to_string().contains("glusterkube-system/legacy"), "{e}");
        let e = ExternalPool::parse(
            &key(),
            Some(EXTERNAL_POOL_SECRET_TYPE),
            &BTreeMap::from([("volume".to_string(), vec![0xff])]),
        )
        .unwrap_err();
        assert_eq!(e.field, "data.volume");
    }
}
