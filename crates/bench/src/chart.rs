//! Charts as SVG and PNG (plotters): E1's style (throughput on the left
//! axis, p99 latency on the right, against client threads or another
//! category) and E4's speed over time.
//!
//! Text needs a TrueType font for layout (SVG) and rasterising (PNG).
//! Plotters' `ab_glyph` backend takes the font as bytes, so no fontconfig is
//! needed: `--font FILE`, `$CAIRN_BENCH_FONT`, or the first of the usual
//! system fonts (Debian's fonts-dejavu-core provides DejaVuSans.ttf).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

/// One line on a chart; `None` leaves a gap.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    /// Series of one group (a target) share a colour: solid on the left
    /// axis, dashed (in darker shades for further operations) on the right.
    pub group: usize,
    pub values: Vec<Option<f64>>,
}

static FONT: OnceLock<Result<PathBuf, String>> = OnceLock::new();

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

fn find_font(custom: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = custom {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("CAIRN_BENCH_FONT") {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = FONT_CANDIDATES.iter().map(Path::new).find(|p| p.is_file()) {
        return Ok(p.to_path_buf());
    }
    // Any TrueType font under the usual directories.
    let mut stack = vec![
        PathBuf::from("/usr/share/fonts"),
        PathBuf::from("/usr/local/share/fonts"),
    ];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("ttf")) {
                return Ok(p);
            }
        }
    }
    Err(
        "no TrueType font found for charts; pass --font FILE.ttf or install fonts-dejavu-core"
            .into(),
    )
}

/// Registers the chart font once; returns its path.
pub fn init_font(custom: Option<&Path>) -> Result<PathBuf, String> {
    FONT.get_or_init(|| {
        let path = find_font(custom)?;
        let bytes = std::fs::read(&path).map_err(|e| format!("font {}: {e}", path.display()))?;
        // Plotters keeps a &'static reference; the font lives for the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))?;
        Ok(path)
    })
    .clone()
}

const W: u32 = 1100;
const H: u32 = 650;

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

/// A darker shade of `c` for the k-th series of a group.
fn shade(c: RGBColor, k: usize) -> RGBColor {
    let f = [1.0, 0.6, 0.8, 0.45][k % 4];
    let m = |v: u8| (v as f64 * f) as u8;
    RGBColor(m(c.0), m(c.1), m(c.2))
}

fn max_of(series: &[Series]) -> f64 {
    series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0f64, |a, b| a.max(*b))
}

/// A category chart in E1's style. Left series are drawn solid (e.g.
/// ops/s per target), right series dashed on the secondary axis (e.g. p99
/// latency per target and operation). Writes `<prefix>.svg` and
/// `<prefix>.png`; returns the files written.
#[allow(clippy::too_many_arguments)]
pub fn category_chart(
    prefix: &Path,
    title: &str,
    x_desc: &str,
    x_labels: &[String],
    left_desc: &str,
    left: &[Series],
    right_desc: &str,
    right: &[Series],
) -> Result<Vec<PathBuf>, String> {
    init_font(None)?;
    let svg = prefix.with_extension("svg");
    let png = prefix.with_extension("png");
    {
        let root = SVGBackend::new(&svg, (W, H)).into_drawing_area();
        draw_category(
            &root, title, x_desc, x_labels, left_desc, left, right_desc, right,
        )?;
        root.present()
            .map_err(|e| format!("{}: {e:?}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (W, H)).into_drawing_area();
        draw_category(
            &root, title, x_desc, x_labels, left_desc, left, right_desc, right,
        )?;
        root.present()
            .map_err(|e| format!("{}: {e:?}", png.display()))?;
    }
    Ok(vec![svg, png])
}

#[allow(clippy::too_many_arguments)]
fn draw_category<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    x_labels: &[String],
    left_desc: &str,
    left: &[Series],
    right_desc: &str,
    right: &[Series],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("chart: {e:?}");
    root.fill(&WHITE).map_err(e)?;
    let n = x_labels.len().max(1);
    // Category i sits at x = 2i + 1 on 0..2n, which leaves half a slot of
    // margin at each end with integer coordinates (whose key points plotters
    // can format).
    let xr = 0i32..(2 * n as i32);
    let keys: Vec<i32> = (0..n as i32).map(|i| 2 * i + 1).collect();
    let lmax = (max_of(left) * 1.15).max(1.0);
    let rmax = (max_of(right) * 1.15).max(1.0);
    let labels = x_labels.to_vec();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .right_y_label_area_size(90)
        .build_cartesian_2d(xr.clone().with_key_points(keys.clone()), 0f64..lmax)
        .map_err(e)?
        .set_secondary_coord(xr.with_key_points(keys), 0f64..rmax);
    let fmt_x = move |x: &i32| {
        if x % 2 == 1 {
            labels.get((x / 2) as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(left_desc)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|v| si(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(e)?;
    chart
        .configure_secondary_axes()
        .y_desc(right_desc)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .y_label_formatter(&|v| si(*v))
        .draw()
        .map_err(e)?;
    for s in left {
        let c = color(s.group);
        let pts: Vec<(i32, f64)> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(x, v)| v.map(|v| (2 * x as i32 + 1, v)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
            .map_err(e)?
            .label(format!("{} (left)", s.name))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))
            .map_err(e)?;
    }
    for (i, s) in right.iter().enumerate() {
        let k = right[..i].iter().filter(|x| x.group == s.group).count();
        let c = shade(color(s.group), k);
        let pts: Vec<(i32, f64)> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(x, v)| v.map(|v| (2 * x as i32 + 1, v)))
            .collect();
        chart
            .draw_secondary_series(DashedLineSeries::new(pts.clone(), 8, 5, c.stroke_width(2)))
            .map_err(e)?
            .label(format!("{} (right)", s.name))
            .legend(move |(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 8, y), (x + 13, y), (x + 24, y)],
                    c.stroke_width(2),
                )
            });
        chart
            .draw_secondary_series(pts.iter().map(|p| TriangleMarker::new(*p, 5, c.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

/// E4's speed over time: one line per series, x in seconds.
/// One line of a timeline chart: the speed in successive intervals (x in
/// seconds at each interval's middle) and the run's average speed.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub average: f64,
}

pub fn timeline_chart(
    prefix: &Path,
    title: &str,
    y_desc: &str,
    series: &[Timeline],
) -> Result<Vec<PathBuf>, String> {
    curve_chart(prefix, title, "seconds since start", y_desc, series)
}

/// Like [`timeline_chart`] with another x axis (E5: percent of the load).
pub fn curve_chart(
    prefix: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Timeline],
) -> Result<Vec<PathBuf>, String> {
    init_font(None)?;
    let svg = prefix.with_extension("svg");
    let png = prefix.with_extension("png");
    {
        let root = SVGBackend::new(&svg, (W, H)).into_drawing_area();
        draw_timeline(&root, title, x_desc, y_desc, series)?;
        root.present()
            .map_err(|e| format!("{}: {e:?}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (W, H)).into_drawing_area();
        draw_timeline(&root, title, x_desc, y_desc, series)?;
        root.present()
            .map_err(|e| format!("{}: {e:?}", png.display()))?;
    }
    Ok(vec![svg, png])
}

fn draw_timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Timeline],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("chart: {e:?}");
    root.fill(&WHITE).map_err(e)?;
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        .ceil()
        .max(1.0);
    let ymax = (series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1).chain([s.average]))
        .fold(0.0f64, f64::max)
        * 1.15)
        .max(1.0);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(100)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .y_label_formatter(&|v| si(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(e)?;
    for (i, t) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(t.points.clone(), c.stroke_width(2)))
            .map_err(e)?
            .label(format!(
                "{} (avg {})",
                t.name,
                crate::report::thousands(t.average)
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(3)));
        chart
            .draw_series(t.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
            .map_err(e)?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, t.average), (xmax, t.average)],
                6,
                6,
                c.mix(0.6).stroke_width(1),
            ))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

/// Compact axis numbers: 950, 12.5k, 3M, 1.25G.
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

/// Makes a file-name-safe fragment.
pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// `<prefix>-<part>` as a path (the prefix may name a directory).
pub fn with_suffix(prefix: &Path, part: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push("-");
    s.push(slug(part));
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_formats() {
        if init_font(None).is_err() {
            eprintln!("no font on this machine; chart test skipped");
            return;
        }
        let dir = std::env::temp_dir().join(format!("cairn-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = category_chart(
            &dir.join("e1"),
            "YCSB workload A",
            "client threads",
            &["8".into(), "16".into(), "32".into()],
            "ops/s",
            &[Series {
                name: "redis ops/s".into(),
                group: 0,
                values: vec![Some(1000.0), Some(1500.0), None],
            }],
            "p99 µs",
            &[Series {
                name: "redis READ p99".into(),
                group: 0,
                values: vec![Some(100.0), Some(200.0), Some(400.0)],
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("client threads"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let files = timeline_chart(
            &dir.join("e4"),
            "MSET",
            "keys/s",
            &[Timeline {
                name: "redis".into(),
                points: vec![(0.5, 10.0), (1.5, 20.0), (2.5, 15.0)],
                average: 15.0,
            }],
        )
        .unwrap();
        assert!(files.iter().all(|f| f.is_file()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn si_numbers() {
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_500.0), "12.5k");
        assert_eq!(si(3_000_000.0), "3M");
        assert_eq!(si(1_250_000_000.0), "1.25G");
        assert_eq!(si(0.5), "0.5");
        assert_eq!(si(0.0), "0");
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("mset-seq t=8"), "mset-seq_t_8");
        assert_eq!(
            with_suffix(Path::new("/tmp/x"), "Run A"),
            PathBuf::from("/tmp/x-run_a")
        );
    }
}
