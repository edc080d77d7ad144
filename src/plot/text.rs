//! Text in the plot: durations for people, thousands separators, XML escaping.

/// A duration for people: "850 ns", "1.2 µs", "12.5 µs", "4.8 ms" (three significant digits,
/// trailing zeros dropped).
pub(crate) fn fmt_duration(ns: f64) -> String {
    let (value, unit) = match ns.abs() {
        magnitude if magnitude >= 1e9 => (ns / 1e9, "s"),
        magnitude if magnitude >= 1e6 => (ns / 1e6, "ms"),
        magnitude if magnitude >= 1e3 => (ns / 1e3, "µs"),
        _ => (ns, "ns"),
    };
    let decimals = match value.abs() {
        magnitude if magnitude >= 100.0 => 0,
        magnitude if magnitude >= 10.0 => 1,
        _ => 2,
    };
    let digits = format!("{value:.decimals$}");
    let digits = if digits.contains('.') {
        digits.trim_end_matches('0').trim_end_matches('.')
    } else {
        &digits
    };
    format!("{digits} {unit}")
}

/// 450000 → "450,000".
pub(super) fn thousands(count: usize) -> String {
    let digits = count.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A generous width of `text` in px at `size` (sans-serif fonts average ~0.6 em a character).
pub(super) fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.6
}

/// Text made safe for XML content and attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            character if (character as u32) < 0x20 && character != '\t' && character != '\n' => {
                out.push(' ')
            }
            character => out.push(character),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_table() {
        let cases = [
            (850.0, "850 ns"),
            (1000.0, "1 µs"),
            (1200.0, "1.2 µs"),
            (1164.0, "1.16 µs"),
            (12_500.0, "12.5 µs"),
            (250_000.0, "250 µs"),
            (4_800_000.0, "4.8 ms"),
            (2e9, "2 s"),
            (5.0, "5 ns"),
        ];
        for (ns, want) in cases {
            assert_eq!(fmt_duration(ns), want);
        }
    }

    #[test]
    fn thousands_and_escape_table() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (450_000, "450,000"),
            (1_234_567, "1,234,567"),
        ];
        for (n, want) in cases {
            assert_eq!(thousands(n), want);
        }
        assert_eq!(
            esc("a<b & \"c\" 'd'>\u{1}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt; "
        );
    }
}
