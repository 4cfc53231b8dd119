//! Numbers as the report prints them: headroom-core's (three significant digits, thousands
//! separated), with "–" for a value that is not finite. Their own module so that the data, the
//! page and the lab report all use them without importing one another.

pub(crate) use headroom_core::numbers::thousands;

/// [`headroom_core::numbers::fmt_value`], "–" when `x` is not finite (no value).
pub fn fmt_value(x: f64) -> String {
    if !x.is_finite() {
        return "–".to_string();
    }
    headroom_core::numbers::fmt_value(x)
}
