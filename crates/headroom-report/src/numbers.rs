//! Numbers as the report prints them: three significant digits ([`fmt_value`]), thousands
//! separated ([`thousands`]). Their own module so that the data, the page and the lab report all
//! use them without importing one another.

/// Three significant digits, every digit of the integer part from 100 on, thousands
/// separators: 12345 -> "12,345", 12.345 -> "12.3", 0.01234 -> "0.0123" (as tables.md).
pub fn fmt_value(x: f64) -> String {
    if !x.is_finite() {
        return "–".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mut e = x.abs().log10().floor() as i32;
    let scale = 10f64.powi(e - 2);
    if ((x.abs() / scale).round() * scale) >= 10f64.powi(e + 1) {
        e += 1;
    }
    if e >= 18 {
        return format!("{x:.2e}");
    }
    if e >= 2 {
        let out = thousands(x.abs().round() as u64);
        return if x < 0.0 { format!("-{out}") } else { out };
    }
    if e < -6 {
        return format!("{x:.2e}");
    }
    format!("{:.*}", (2 - e) as usize, x)
}

/// A count with thousands separators: 1234567 -> "1,234,567".
pub(crate) fn thousands(n: u64) -> String {
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
