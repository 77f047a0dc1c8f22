//! The experiment's figures (SVG, plotters): Fig. 5's latency and
//! achievable throughput against cache size, Fig. 6's GET latency against
//! offered load.

use std::path::Path;

use plotters::prelude::*;

pub struct Row {
    pub workload: &'static str,
    pub combo: String,
    pub cache: f64,
    pub offered: f64,
    pub achieved: f64,
    pub median_us: f64,
    pub p999_us: f64,
}

const COMBOS: [(&str, RGBColor); 4] = [
    ("busy-wait/cpu", RGBColor(31, 119, 180)),
    ("busy-wait/engine", RGBColor(174, 199, 232)),
    ("yield/cpu", RGBColor(214, 39, 40)),
    ("yield/engine", RGBColor(255, 152, 150)),
];

type Res = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

pub fn all(dir: &Path, rows: &[Row], bound_us: f64) -> Res {
    let fixed: Vec<&Row> = first_per_group(rows, "array");
    lines(
        &dir.join("array-latency.svg"),
        "Array indirection: latency at a fixed load vs local cache",
        "local cache (% of the array)",
        "latency (µs, log)",
        &fixed,
        |r| r.cache * 100.0,
        true,
    )?;
    let through: Vec<(String, f64, f64)> = COMBOS
        .iter()
        .flat_map(|(c, _)| {
            let mut caches: Vec<f64> = rows
                .iter()
                .filter(|r| r.workload == "array")
                .map(|r| r.cache)
                .collect();
            caches.sort_by(f64::total_cmp);
            caches.dedup();
            caches.into_iter().map(move |cache| {
                let best = rows
                    .iter()
                    .filter(|r| r.workload == "array" && r.combo == *c && r.cache == cache)
                    .skip(1)
                    .filter(|r| r.p999_us <= bound_us && r.achieved >= 0.9 * r.offered)
                    .map(|r| r.offered)
                    .fold(0.0, f64::max);
                (c.to_string(), cache * 100.0, best / 1e3)
            })
        })
        .collect();
    xy(
        &dir.join("array-throughput.svg"),
        &format!("Array indirection: achievable throughput (P99.9 ≤ {bound_us:.0} µs)"),
        "local cache (% of the array)",
        "krequests/s",
        &through,
    )?;
    let kv: Vec<&Row> = rows.iter().filter(|r| r.workload == "kv").collect();
    let kv_sweep: Vec<&Row> = skip_first_per_combo(&kv);
    lines(
        &dir.join("kv-latency.svg"),
        "Key-value store (99 % GET / 1 % SCAN): GET latency vs offered load",
        "offered load (krequests/s)",
        "latency (µs, log)",
        &kv_sweep,
        |r| r.offered / 1e3,
        true,
    )
}

fn first_per_group<'a>(rows: &'a [Row], workload: &str) -> Vec<&'a Row> {
    let mut out: Vec<&Row> = Vec::new();
    for r in rows.iter().filter(|r| r.workload == workload) {
        if !out.iter().any(|o| o.combo == r.combo && o.cache == r.cache) {
            out.push(r);
        }
    }
    out
}

fn skip_first_per_combo<'a>(rows: &[&'a Row]) -> Vec<&'a Row> {
    let mut seen: Vec<&str> = Vec::new();
    rows.iter()
        .filter(|r| {
            if seen.contains(&r.combo.as_str()) {
                true
            } else {
                seen.push(&r.combo);
                false
            }
        })
        .copied()
        .collect()
}

/// Median (dashed) and P99.9 (solid) per combination against `x`.
fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    rows: &[&Row],
    x: impl Fn(&Row) -> f64,
    _log: bool,
) -> Res {
    if rows.is_empty() {
        return Ok(());
    }
    let xmax = rows.iter().map(|r| x(r)).fold(0.0, f64::max) * 1.05;
    let xmin = rows.iter().map(|r| x(r)).fold(f64::INFINITY, f64::min) * 0.95;
    let ymax = rows.iter().map(|r| r.p999_us).fold(1.0, f64::max) * 1.5;
    let ymin = rows
        .iter()
        .map(|r| r.median_us)
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
        * 0.7;
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(xmin..xmax, (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (name, color) in COMBOS {
        let mut mine: Vec<&&Row> = rows.iter().filter(|r| r.combo == name).collect();
        mine.sort_by(|a, b| x(a).total_cmp(&x(b)));
        let p999: Vec<(f64, f64)> = mine.iter().map(|r| (x(r), r.p999_us)).collect();
        let med: Vec<(f64, f64)> = mine.iter().map(|r| (x(r), r.median_us)).collect();
        chart
            .draw_series(LineSeries::new(p999.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{name} P99.9"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(p999.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
        chart
            .draw_series(DashedLineSeries::new(med, 4, 3, color.stroke_width(1)))
            .map_err(err)?
            .label(format!("{name} median"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// One line per combination: (combo, x, y).
fn xy(path: &Path, title: &str, x_desc: &str, y_desc: &str, pts: &[(String, f64, f64)]) -> Res {
    if pts.is_empty() {
        return Ok(());
    }
    let xmax = pts.iter().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let xmin = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min) * 0.95;
    let ymax = pts.iter().map(|p| p.2).fold(0.1, f64::max) * 1.2;
    let root = SVGBackend::new(path, (760, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(xmin..xmax, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (name, color) in COMBOS {
        let line: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.0 == name)
            .map(|p| (p.1, p.2))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
