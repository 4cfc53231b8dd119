//! Numbers as people read them, the same in every output (the run's summary on the terminal,
//! the lab's tables, the reports, `headroom serve --surge`): counts with thousands separators
//! ([`thousands`]) and figures to three significant digits ([`fmt_value`]).

/// A count with thousands separators: 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Three significant digits, every digit of the integer part from 100 on, thousands
/// separators: 12345 -> "12,345", 12.345 -> "12.3", 0.01234 -> "0.0123"; an exponent below
/// 1e-6 and from 1e18 on. A value that is not finite is written as Rust writes it ("NaN",
/// "inf"): a caller with a glyph for "no value" checks first.
pub fn fmt_value(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mut e = x.abs().log10().floor() as i32;
    // Rounding to three significant digits may carry into the next decade (9.996 -> 10.0).
    let scale = 10f64.powi(e - 2);
    if ((x.abs() / scale).round() * scale) >= 10f64.powi(e + 1) {
        e += 1;
    }
    if !(-6..18).contains(&e) {
        return format!("{x:.2e}");
    }
    if e >= 2 {
        let out = thousands(x.abs().round() as u64);
        return if x < 0.0 { format!("-{out}") } else { out };
    }
    format!("{:.*}", (2 - e) as usize, x)
}

#[cfg(test)]
mod tests {
    use super::{fmt_value, thousands};

    #[test]
    fn thousands_separates_every_three_digits() {
        for (n, want) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (1_234_567, "1,234,567"),
            (u64::MAX, "18,446,744,073,709,551,615"),
        ] {
            assert_eq!(thousands(n), want);
        }
    }

    #[test]
    fn fmt_value_significant_digits() {
        let cases = [
            (12345.0, "12,345"),
            (1234567.8, "1,234,568"),
            (-12345.0, "-12,345"),
            (100.0, "100"),
            (99.96, "100"),
            (99.94, "99.9"),
            (12.345, "12.3"),
            (9.996, "10.0"),
            (3.0, "3.00"),
            (1.2345, "1.23"),
            (0.5, "0.500"),
            (0.01234, "0.0123"),
            (-0.01234, "-0.0123"),
            (0.0000012345, "0.00000123"),
            (0.00000012345, "1.23e-7"),
            (2.5e18, "2.50e18"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
        ];
        for (x, want) in cases {
            assert_eq!(fmt_value(x), want, "{x}");
        }
    }
}
