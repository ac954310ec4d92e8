//! Who may mount a volume, as gluster volume options: with TLS, `client.ssl`/`server.ssl`, a
//! modern cipher list and `auth.ssl-allow` naming the allowed certificate common names; without
//! it, `auth.allow` with the allowed addresses. Neither is ever `*`.
//!
//! What gluster 10.3 accepts was checked against real glusterd (tests/tests/gluster_tls.rs):
//! `auth.allow` takes addresses and `*` wildcards per octet, and neither CIDR nor `?` ("not a
//! valid internet-address-list"), so CIDRs are turned into wildcard patterns here.

use std::net::Ipv4Addr;

/// TLS 1.2 suites with forward secrecy and AEAD only, for the ECDSA keys the PKI issues; TLS
/// 1.3 suites are all AEAD and are not restricted by this list.
pub const CIPHER_LIST: &str =
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256";

/// A CIDR wider than this many wildcard patterns is refused: such a range is better expressed
/// as a shorter prefix.
pub const MAX_PATTERNS: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct AccessError {
    pub field: String,
    pub reason: String,
}

fn bad(field: &str, reason: String) -> AccessError {
    AccessError {
        field: field.to_string(),
        reason,
    }
}

/// Who may mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// TLS on management and I/O; only these certificate common names may connect to bricks
    /// (the cluster's nodes, for self-heal and quota, and the CSI node plugins).
    Tls { common_names: Vec<String> },
    /// No TLS; only these IPv4 CIDRs (node and pod ranges) may connect.
    Addresses { cidrs: Vec<String> },
}

/// The volume options that enforce `access`, in the order they should be set.
pub fn volume_options(access: &Access) -> Result<Vec<(String, String)>, AccessError> {
    let opt = |k: &str, v: String| (k.to_string(), v);
    match access {
        Access::Tls { common_names } => {
            let mut names = common_names.clone();
            names.sort();
            names.dedup();
            if names.is_empty() {
                return Err(bad(
                    "tls.allowedNames",
                    "at least one certificate name must be allowed".into(),
                ));
            }
            for n in &names {
                let ok = !n.is_empty()
                    && n.len() <= 64
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
                if !ok {
                    return Err(bad(
                        "tls.allowedNames",
                        format!("{n:?} must be 1-64 letters, digits, '-', '.' or '_'"),
                    ));
                }
            }
            Ok(vec![
                opt("client.ssl", "on".into()),
                opt("server.ssl", "on".into()),
                opt("ssl.cipher-list", CIPHER_LIST.into()),
                opt("auth.ssl-allow", names.join(",")),
            ])
        }
        Access::Addresses { cidrs } => {
            let mut patterns = Vec::new();
            for c in cidrs {
                for p in auth_allow_patterns(c)? {
                    if !patterns.contains(&p) {
                        patterns.push(p);
                    }
                }
            }
            if patterns.is_empty() {
                return Err(bad(
                    "clientNetworks",
                    "at least one network must be allowed; gluster's default lets everyone in"
                        .into(),
                ));
            }
            Ok(vec![opt("auth.allow", patterns.join(","))])
        }
    }
}

/// An IPv4 CIDR as gluster `auth.allow` patterns: the address itself for /32, one `*`
/// pattern per octet boundary, and for other prefixes one pattern per value of the partial
/// octet. `0.0.0.0/0` (everyone) is refused.
pub fn auth_allow_patterns(cidr: &str) -> Result<Vec<String>, AccessError> {
    let field = "clientNetworks";
    let (addr, len) = cidr
        .split_once('/')
        .ok_or_else(|| bad(field, format!("{cidr:?} is not a CIDR like 10.244.0.0/16")))?;
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| bad(field, format!("{cidr:?}: {addr:?} is not an IPv4 address")))?;
    let len: u32 = len
        .parse()
        .ok()
        .filter(|l| (8..=32).contains(l))
        .ok_or_else(|| {
            bad(
                field,
                format!("{cidr:?}: the prefix length must be 8 to 32 (never everyone)"),
            )
        })?;
    let bits = u32::from(addr);
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    if bits & !mask != 0 {
        return Err(bad(
            field,
            format!("{cidr:?} has host bits set; write its network address"),
        ));
    }
    let octets = addr.octets();
    let whole = (len / 8) as usize;
    let spare = len % 8;
    let stars = |fixed: &[u8]| -> String {
        let mut parts: Vec<String> = fixed.iter().map(u8::to_string).collect();
        while parts.len() < 4 {
            parts.push("*".into());
        }
        parts.join(".")
    };
    if spare == 0 {
        return Ok(vec![stars(&octets[..whole])]);
    }
    let count = 1usize << (8 - spare);
    if count > MAX_PATTERNS {
        return Err(bad(field, format!("{cidr:?} is too wide")));
    }
    let first = octets[whole];
    Ok((0..count)
        .map(|i| {
            let mut fixed = octets[..whole].to_vec();
            fixed.push(first + i as u8);
            stars(&fixed)
        })
        .collect())
}

/// Whether gluster's `auth.allow` matching (fnmatch on the dotted address) lets `addr` in
/// through `pattern`, for the patterns [`auth_allow_patterns`] makes.
pub fn pattern_matches(pattern: &str, addr: Ipv4Addr) -> bool {
    let octets = addr.octets();
    let parts: Vec<&str> = pattern.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .zip(octets)
            .all(|(p, o)| *p == "*" || p.parse::<u8>().ok() == Some(o))
}

/// The certificate common name of a storage node's glusterd and bricks.
pub fn node_identity(cluster: &str, node: &str) -> String {
    format!("gk-node.{cluster}.{node}")
}

/// The certificate common name of the CSI node plugins' FUSE clients.
pub const CSI_CLIENT_IDENTITY: &str = "gk-csi-node";

/// The certificate common name shared by one cluster's glusterd and bricks (its self-heal,
/// quota and rebalance clients connect with it too). Built from the GlusterCluster's uid: unique,
/// and always within the 64 characters a common name may have.
pub fn cluster_identity(uid: &str) -> String {
    format!("gk-node-{uid}")
}

/// Volume options the operator sets for access control; a GlusterVolume's own options may
/// not name them.
pub fn is_access_option(key: &str) -> bool {
    matches!(
        key,
        "auth.allow" | "auth.reject" | "auth.ssl-allow" | "client.ssl" | "server.ssl"
    ) || key.starts_with("ssl.")
}

/// Who may mount a cluster's volumes: with TLS its own nodes and the CSI node plugins, by
/// certificate; without, the cluster's `clientNetworks`.
pub fn cluster_access(tls: bool, uid: &str, client_networks: &[String]) -> Access {
    if tls {
        Access::Tls {
            common_names: vec![cluster_identity(uid), CSI_CLIENT_IDENTITY.to_string()],
        }
    } else {
        Access::Addresses {
            cidrs: client_networks.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cluster_access_is_by_certificate_or_by_network_never_everyone() {
        let uid = "0c6f2f3e-5a1b-4c8e-9d2f-3b4a5c6d7e8f";
        assert!(cluster_identity(uid).len() <= 64);
        let tls = volume_options(&cluster_access(true, uid, &[])).unwrap();
        assert_eq!(
            tls.last().unwrap(),
            &(
                "auth.ssl-allow".to_string(),
                format!("gk-csi-node,gk-node-{uid}")
            )
        );
        let plain = volume_options(&cluster_access(false, uid, &["10.244.0.0/16".into()])).unwrap();
        assert_eq!(
            plain,
            [("auth.allow".to_string(), "10.244.*.*".to_string())]
        );
        let e = volume_options(&cluster_access(false, uid, &[])).unwrap_err();
        assert_eq!(e.field, "clientNetworks");
        for k in [
            "auth.allow",
            "auth.ssl-allow",
            "server.ssl",
            "client.ssl",
            "ssl.cipher-list",
        ] {
            assert!(is_access_option(k), "{k}");
        }
        assert!(!is_access_option("performance.cache-size"));
    }

    #[test]
    fn tls_options_name_only_the_allowed_identities() {
        let opts = volume_options(&Access::Tls {
            common_names: vec![
                CSI_CLIENT_IDENTITY.into(),
                node_identity("g", "a"),
                CSI_CLIENT_IDENTITY.into(),
            ],
        })
        .unwrap();
        assert_eq!(
            opts.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            [
                "client.ssl",
                "server.ssl",
                "ssl.cipher-list",
                "auth.ssl-allow"
            ]
        );
        assert_eq!(opts[3].1, "gk-csi-node,gk-node.g.a");
        for bad_names in [vec![], vec!["*".to_string()], vec!["a,b".to_string()]] {
            let e = volume_options(&Access::Tls {
                common_names: bad_names,
            })
            .unwrap_err();
            assert_eq!(e.field, "tls.allowedNames");
        }
    }

    #[test]
    fn cidrs_become_gluster_patterns() {
        let p = |c: &str| auth_allow_patterns(c).unwrap();
        assert_eq!(p("10.213.0.100/32"), ["10.213.0.100"]);
        assert_eq!(p("10.244.0.0/16"), ["10.244.*.*"]);
        assert_eq!(p("10.0.0.0/8"), ["10.*.*.*"]);
        assert_eq!(
            p("10.244.16.0/22"),
            ["10.244.16.*", "10.244.17.*", "10.244.18.*", "10.244.19.*"]
        );
        assert_eq!(p("10.213.0.96/28").len(), 16);
        for bad_cidr in [
            "0.0.0.0/0",
            "10.0.0.0/4",
            "10.0.0.1/24",
            "10.0.0.0",
            "fd00::/64",
            "10.0.0.0/33",
            "",
        ] {
            let e = auth_allow_patterns(bad_cidr).unwrap_err();
            assert_eq!(e.field, "clientNetworks", "{bad_cidr}");
        }
        let opts = volume_options(&Access::Addresses {
            cidrs: vec!["10.213.0.1/32".into(), "10.213.0.100/32".into()],
        })
        .unwrap();
        assert_eq!(
            opts,
            [("auth.allow".into(), "10.213.0.1,10.213.0.100".into())]
        );
        assert!(volume_options(&Access::Addresses { cidrs: vec![] }).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The patterns admit exactly the CIDR's addresses: every address inside matches one,
        /// and an address outside matches none.
        #[test]
        fn patterns_admit_exactly_the_cidr(
            base in any::<u32>(),
            len in 8u32..=32,
            probe in any::<u32>(),
            offset in any::<u32>(),
        ) {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            let net = base & mask;
            let cidr = format!("{}/{len}", Ipv4Addr::from(net));
            let patterns = auth_allow_patterns(&cidr).unwrap();
            prop_assert!(patterns.len() <= MAX_PATTERNS);
            prop_assert!(patterns.iter().all(|p| p != "*" && p != "*.*.*.*"));
            let inside = Ipv4Addr::from(net | (offset & !mask));
            prop_assert!(patterns.iter().any(|p| pattern_matches(p, inside)), "{cidr} {inside}");
            let probe_in = probe & mask == net;
            let matched = patterns.iter().any(|p| pattern_matches(p, Ipv4Addr::from(probe)));
            prop_assert_eq!(matched, probe_in, "{} {}", cidr, Ipv4Addr::from(probe));
        }

        /// Arbitrary text never panics and is either refused with the field named or gives
        /// patterns without `*` alone.
        #[test]
        fn arbitrary_cidrs_are_refused_or_safe(s in "[0-9./]{0,20}|.{0,24}") {
            match auth_allow_patterns(&s) {
                Ok(p) => prop_assert!(!p.is_empty() && p.iter().all(|p| !p.starts_with('*'))),
                Err(e) => prop_assert_eq!(e.field, "clientNetworks"),
            }
        }
    }
}
