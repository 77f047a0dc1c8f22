//! SVG plots (plotters' SVG backend only: no fonts or system libraries).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::record::Record;

const COLORS: [RGBColor; 13] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(148, 103, 189),
    RGBColor(31, 119, 180),
    RGBColor(23, 190, 207),
    RGBColor(44, 160, 44),
    RGBColor(127, 127, 127),
    RGBColor(0, 0, 0),
    RGBColor(100, 100, 255),
    RGBColor(0, 100, 0),
];

/// One line per system: (system, points).
type Series = Vec<(String, Vec<(f64, f64)>)>;

fn series(
    rs: &[&Record],
    x: impl Fn(&Record) -> Option<f64>,
    y: impl Fn(&Record) -> Option<f64>,
) -> Series {
    let mut out: Series = Vec::new();
    for r in rs {
        let (Some(xv), Some(yv)) = (x(r), y(r)) else {
            continue;
        };
        if xv <= 0.0 || yv <= 0.0 {
            continue;
        }
        match out.iter_mut().find(|(s, _)| s == &r.system) {
            Some((_, pts)) => pts.push((xv, yv)),
            None => out.push((r.system.clone(), vec![(xv, yv)])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn draw(
    legend: SeriesLabelPosition,
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    data: &Series,
    log_y: bool,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let pts = data.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err("nothing to plot".into());
    }
    let (x0, x1) = (x0 / 1.5, x1 * 1.5);
    let (y0, y1) = if log_y {
        (y0 / 1.5, y1 * 1.5)
    } else {
        (0.0, y1 * 1.1)
    };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(xlabel)
                .y_desc(ylabel)
                .draw()
                .map_err(|e| err(&e))?;
            for (i, (name, p)) in data.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(p.iter().map(|&xy| Circle::new(xy, 3, c.filled())))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(legend)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if log_y {
        finish!(b
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| err(&e))?);
    } else {
        finish!(b
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(|e| err(&e))?);
    }
    root.present().map_err(|e| err(&e))
}

/// One line per named series (x on a log scale), for figures drawn from
/// something other than records (e.g. `examples/scaling.rs`).
pub fn lines(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    data: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    draw(
        SeriesLabelPosition::UpperLeft,
        path,
        title,
        xlabel,
        ylabel,
        &data.to_vec(),
        false,
    )
}

/// Draws every figure the records allow; returns the files written and
/// the figures that failed.
pub fn all(dir: &Path, records: &[Record], affinities: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let mut written = Vec::new();
    let mut failed = Vec::new();
    let mut emit = |name: String,
                    title: String,
                    xl: &str,
                    yl: &str,
                    data: Series,
                    legend: SeriesLabelPosition| {
        if data.is_empty() {
            return;
        }
        let path = dir.join(&name);
        match draw(legend, &path, &title, xl, yl, &data, true) {
            Ok(()) => written.push(path),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    };
    for aff in affinities {
        let rs: Vec<&Record> = records.iter().filter(|r| &r.affinity == aff).collect();
        let rtt: Vec<&Record> = rs.iter().copied().filter(|r| r.workload == "rtt").collect();
        let data = series(&rtt, |r| r.size.map(|s| s as f64), |r| Some(r.p50_us));
        emit(
            format!("rtt_{aff}.svg"),
            format!("RTT vs message size (p50, {aff})"),
            "message size (bytes)",
            "RTT (us)",
            data,
            SeriesLabelPosition::UpperLeft,
        );
        let tp: Vec<&Record> = rs
            .iter()
            .copied()
            .filter(|r| r.workload == "throughput")
            .collect();
        let mut sizes: Vec<usize> = tp.iter().filter_map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let these: Vec<&Record> = tp
                .iter()
                .copied()
                .filter(|r| r.size == Some(size))
                .collect();
            let data = series(
                &these,
                |r| r.concurrency.map(|c| c as f64),
                |r| Some(r.rpc_per_s),
            );
            emit(
                format!("throughput_{size}_{aff}.svg"),
                format!("Throughput vs outstanding RPCs ({size} B, {aff})"),
                "outstanding RPCs",
                "RPC/s",
                data,
                SeriesLabelPosition::LowerRight,
            );
        }
        let mixed: Vec<&Record> = rs
            .iter()
            .copied()
            .filter(|r| r.workload == "mixed")
            .collect();
        let mut runs: Vec<(String, u64)> = mixed
            .iter()
            .filter_map(|r| Some((r.dist.clone()?, (r.load? * 100.0) as u64)))
            .collect();
        runs.sort();
        runs.dedup();
        for (dist, load) in runs {
            let these: Vec<&Record> = mixed
                .iter()
                .copied()
                .filter(|r| {
                    r.dist.as_deref() == Some(dist.as_str())
                        && r.load.map(|l| (l * 100.0) as u64) == Some(load)
                })
                .collect();
            let bucket_size = |r: &Record| -> Option<f64> {
                r.bucket.as_deref()?.strip_prefix("<=")?.parse().ok()
            };
            let data = series(&these, bucket_size, |r| r.slowdown_p99);
            emit(
                format!("slowdown_{dist}_{load}_{aff}.svg"),
                format!("p99 slowdown vs size ({dist}, {load}% load, {aff})"),
                "message size bucket (bytes, upper bound)",
                "p99 slowdown",
                data,
                SeriesLabelPosition::UpperRight,
            );
        }
    }
    (written, failed)
}
