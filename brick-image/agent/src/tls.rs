//! Mutual TLS for the agent's gRPC API. Clients must present a certificate signed by the
//! cluster's CA; the operator issues both sides from that CA.

use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// PEM files of one side of the connection: the CA that signs the peer, our certificate and
/// our key. The Secret the operator mounts uses these file names.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// `ca.crt`, `tls.crt` and `tls.key` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            ca: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    fn read(&self) -> std::io::Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        let read = |p: &Path| {
            std::fs::read(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        Ok((read(&self.ca)?, read(&self.cert)?, read(&self.key)?))
    }

    /// Server side: our identity, and client certificates required and checked against the CA.
    pub fn server_config(&self) -> std::io::Result<ServerTlsConfig> {
        let (ca, cert, key) = self.read()?;
        Ok(server_config(&ca, &cert, &key))
    }

    /// Client side: the agent's certificate must be for `server_name` and signed by the CA.
    pub fn client_config(&self, server_name: &str) -> std::io::Result<ClientTlsConfig> {
        let (ca, cert, key) = self.read()?;
        Ok(client_config(&ca, &cert, &key, server_name))
    }
}

pub fn server_config(ca: &[u8], cert: &[u8], key: &[u8]) -> ServerTlsConfig {
    ServerTlsConfig::new()
        .identity(Identity::from_pem(cert, key))
        .client_ca_root(Certificate::from_pem(ca))
        .client_auth_optional(false)
}

pub fn client_config(ca: &[u8], cert: &[u8], key: &[u8], server_name: &str) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(Identity::from_pem(cert, key))
        .domain_name(server_name)
}
