//! Columns in kubectl's manner: upper-case headers, each column as wide as its widest cell
//! plus three spaces, the last one not padded.

/// Renders `rows` under `headers`. Rows shorter than the headers are padded with blanks.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(widths.len()) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, w) in widths.iter().enumerate() {
            let cell = cells.get(i).copied().unwrap_or("");
            out.push_str(cell);
            if i + 1 < widths.len() {
                out.push_str(&" ".repeat(w - cell.chars().count() + 3));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Bytes in binary units (`1.5Gi`, `512.0Mi`, `0`).
pub fn bytes(n: i64) -> String {
    gk_api::units::human_bytes(n.max(0) as u64)
}

/// `used/total (n%)`, or `-` when the total is not known.
pub fn usage(used: i64, total: i64) -> String {
    if total <= 0 {
        return "-".into();
    }
    let pct = (used.max(0) as f64 * 100.0 / total as f64).round() as i64;
    format!("{}/{} ({pct}%)", bytes(used), bytes(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_the_last_is_not_padded() {
        let out = render(
            &["NAME", "READY", "MESSAGE"],
            &[
                vec!["pool".into(), "True".into(), "".into()],
                vec!["a-long-name".into(), "False".into(), "2 of 3 bricks".into()],
            ],
        );
        assert_eq!(
            out,
            "NAME          READY   MESSAGE\n\
             pool          True\n\
             a-long-name   False   2 of 3 bricks\n"
        );
    }

    #[test]
    fn usage_reads_like_df() {
        assert_eq!(usage(1 << 29, 1 << 30), "512.0Mi/1.0Gi (50%)");
        assert_eq!(usage(5, 0), "-");
    }
}
