//! A small SVG line chart for benchmark reports: AWS requests per second over time, with
//! throttled requests and shaded periods (e.g. when throttling was injected).

use std::fmt::Write as _;

/// One series of (second, value) points.
pub struct Series<'a> {
    /// Legend name.
    pub name: &'a str,
    /// Stroke colour.
    pub color: &'a str,
    /// (x, y) points.
    pub points: &'a [(f64, f64)],
}

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 50.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

/// A shaded period of the chart (e.g. when throttling was injected).
pub struct Period<'a> {
    /// Start on the x axis.
    pub start: f64,
    /// End on the x axis.
    pub end: f64,
    /// Label.
    pub label: &'a str,
    /// Fill colour.
    pub color: &'a str,
}

/// Renders the series over `[0, x_max]` seconds with the shaded, labelled `periods`.
pub fn line_chart(title: &str, series: &[Series<'_>], periods: &[Period<'_>]) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(periods.iter().map(|p| p.end))
        .fold(1.0_f64, f64::max);
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max)
        * 1.1;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="18" font-size="14">{}</text>"#,
        escape(title)
    );
    for p in periods {
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="{}" opacity="0.6"><title>{}</title></rect>"#,
            x(p.start),
            (x(p.end) - x(p.start)).max(1.0),
            p.color,
            escape(p.label)
        );
    }
    // Axes with a few ticks.
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>"#,
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h,
        TOP + plot_h
    );
    for i in 0..=4 {
        let v = y_max / 1.1 * i as f64 / 4.0;
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{:.0}</text>"#,
            LEFT - 5.0,
            y(v) + 4.0,
            v
        );
        let t = x_max * i as f64 / 4.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.0} s</text>"#,
            x(t),
            TOP + plot_h + 15.0,
            t
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="15" y="{:.1}" transform="rotate(-90 15 {:.1})" text-anchor="middle">requests/s</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.5" points="{}"/>"#,
            s.color,
            points.join(" ")
        );
        let lx = LEFT + 10.0 + 170.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="{}" width="12" height="3" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            HEIGHT - 12.0,
            s.color,
            lx + 16.0,
            HEIGHT - 8.0,
            escape(s.name)
        );
    }
    // One legend entry per distinct period label.
    let mut labels: Vec<(&str, &str)> = Vec::new();
    for p in periods {
        if !labels.iter().any(|(l, _)| *l == p.label) {
            labels.push((p.label, p.color));
        }
    }
    for (i, (label, color)) in labels.iter().enumerate() {
        let lx = LEFT + 10.0 + 170.0 * (series.len() + i) as f64;
        let _ = writeln!(
            svg,
            r#"<rect x="{lx}" y="{}" width="12" height="10" fill="{color}"/><text x="{}" y="{}">{}</text>"#,
            HEIGHT - 18.0,
            lx + 16.0,
            HEIGHT - 8.0,
            escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_periods_and_escapes() {
        let requests = [(0.0, 10.0), (1.0, 40.0), (2.0, 5.0)];
        let throttled = [(0.0, 0.0), (1.0, 12.0), (2.0, 0.0)];
        let svg = line_chart(
            "AWS <requests>",
            &[
                Series {
                    name: "requests/s",
                    color: "#1f77b4",
                    points: &requests,
                },
                Series {
                    name: "throttled/s",
                    color: "#d62728",
                    points: &throttled,
                },
            ],
            &[
                Period {
                    start: 0.5,
                    end: 1.5,
                    label: "30 % throttled",
                    color: "#f4c7c3",
                },
                Period {
                    start: 1.6,
                    end: 1.9,
                    label: "AWS unreachable",
                    color: "#c6dbef",
                },
            ],
        );
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("AWS &lt;requests&gt;"));
        assert!(svg.contains("30 % throttled"));
        assert!(svg.contains("AWS unreachable"));
        assert_eq!(
            svg.matches("fill=\"#c6dbef\"").count(),
            2,
            "band and legend"
        );
        // The peak (40) sits inside the plot area.
        assert!(svg.contains(&format!(
            "{:.1}",
            TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - 40.0 / 44.0)
        )));
    }
}
