//! Sizes: Kubernetes quantities in bytes, bytes for people, and the rounding status uses.

/// A size that is not a Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {value:?} is not a size such as 100Gi, 500M or 1073741824")]
pub struct QuantityError {
    pub field: String,
    pub value: String,
}

/// Bytes in a Kubernetes quantity such as `100Gi`, `1.5T` or `1073741824` (a fraction of a
/// byte rounds up); `field` names where it came from in the error.
pub fn quantity_bytes(field: &str, q: &str) -> Result<u64, QuantityError> {
    let bytes = quantity_value(field, q)?.ceil();
    if !(0.0..u64::MAX as f64).contains(&bytes) {
        return Err(QuantityError {
            field: field.to_string(),
            value: q.to_string(),
        });
    }
    Ok(bytes as u64)
}

/// The value of any Kubernetes quantity (`500m`, `1.5Gi`, `-1`, `2e3`), as a number: for
/// comparing requests with limits, and refusing negative ones. Sizes in bytes use
/// [`quantity_bytes`].
///
/// Written here because no maintained crate reads Kubernetes' grammar: `kube_quantity`
/// (0.9.0, the one release that builds against k8s-openapi 0.29; 0.6 to 0.8 pin 0.18 to
/// 0.23) refuses the exa suffixes `E` and `Ei`, which the apiserver's `isQuantity` accepts,
/// and accepts an exponent with a suffix (`1e3Gi`), which Kubernetes refuses; the test
/// `kube_quantity_does_not_read_kubernetes_quantities` shows both.
pub fn quantity_value(field: &str, q: &str) -> Result<f64, QuantityError> {
    let bad = || QuantityError {
        field: field.to_string(),
        value: q.to_string(),
    };
    let split = q
        .char_indices()
        .find(|&(i, c)| {
            c.is_ascii_alphabetic() && !(i > 0 && (c == 'e' || c == 'E') && exponent_follows(q, i))
        })
        .map(|(i, _)| i)
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let scale: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return Err(bad()),
    };
    let plain = number
        .trim_start_matches(['+', '-'])
        .split(['e', 'E'])
        .next()
        .unwrap_or("");
    if plain.is_empty() || !plain.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let n: f64 = number.parse().map_err(|_| bad())?;
    n.is_finite().then_some(n * scale).ok_or_else(bad)
}

/// Whether the `e` at `i` starts a decimal exponent (`2e3`), not the `E` (exa) suffix.
fn exponent_follows(q: &str, i: usize) -> bool {
    let rest = &q[i + 1..];
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
}

/// Bytes in binary units with one decimal, for example "1.5Ti".
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

/// Bytes rounded down to whole MiB: status shows capacity at this grain, so that ordinary
/// churn on the disks does not rewrite status on every refresh.
pub fn round_mib(b: u64) -> u64 {
    b / (1 << 20) * (1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_in_bytes() {
        assert_eq!(quantity_bytes("f", "1Gi").unwrap(), 1 << 30);
        assert_eq!(quantity_bytes("f", "1.5Ki").unwrap(), 1536);
        assert_eq!(quantity_bytes("f", "2G").unwrap(), 2_000_000_000);
        assert_eq!(quantity_bytes("f", "1073741824").unwrap(), 1 << 30);
        assert_eq!(quantity_bytes("f", "1e9").unwrap(), 1_000_000_000);
        for bad in ["", "Gi", "1Qi", "-1Gi", "100GB", "99999999999Ei"] {
            assert_eq!(
                quantity_bytes("spec.size", bad).unwrap_err().field,
                "spec.size",
                "{bad}"
            );
        }
    }

    #[test]
    fn any_quantity_has_a_value() {
        let v = |q: &str| quantity_value("f", q).unwrap();
        assert_eq!(v("500m"), 0.5);
        assert_eq!(v("2"), 2.0);
        assert_eq!(v("-1"), -1.0);
        assert_eq!(v("1Gi"), (1u64 << 30) as f64);
        assert_eq!(v("2e3"), 2000.0);
        assert_eq!(v("1E"), 1e18);
        assert_eq!(v("+3k"), 3000.0);
        for bad in ["", "lots", "1GB", "m", "1.2.3", "--1", "1e"] {
            assert!(quantity_value("f", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn people_read_binary_units() {
        assert_eq!(human_bytes(512), "512");
        assert_eq!(human_bytes(3 << 20), "3.0Mi");
        assert_eq!(human_bytes(3 << 39), "1.5Ti");
        assert_eq!(round_mib((5 << 20) + 12345), 5 << 20);
    }

    /// Why `kube_quantity` is not used (see [`quantity_value`]): it disagrees with
    /// Kubernetes on valid and invalid quantities. When this fails, it may fit.
    #[test]
    fn kube_quantity_does_not_read_kubernetes_quantities() {
        let theirs = |q: &str| {
            kube_quantity::ParsedQuantity::try_from(q)
                .ok()
                .and_then(|p| p.to_bytes_f64())
        };
        for valid in ["1E", "1Ei", "12E"] {
            assert!(quantity_value("f", valid).is_ok(), "{valid}");
            assert_eq!(theirs(valid), None, "kube_quantity now reads {valid}");
        }
        for invalid in ["1e3Gi", "0e0Ki"] {
            assert!(quantity_value("f", invalid).is_err(), "{invalid}");
            assert!(
                theirs(invalid).is_some(),
                "kube_quantity now refuses {invalid}"
            );
        }
        // Both read ordinary sizes alike.
        for q in ["1Gi", "1.5Ki", "500m", "2e3", "100M"] {
            assert_eq!(theirs(q), quantity_value("f", q).ok(), "{q}");
        }
    }
}
