//! The figure: throughput per workload, value size and transport, shaped
//! like Fig. 8 of the SMT paper (Gao et al.; one panel per workload, a group of bars per
//! value size, one bar per transport). SVG only (plotters' SVG backend:
//! no fonts or system libraries).

use std::path::Path;

use plotters::prelude::*;

use super::report::size_label;
use super::run::Cell;

const TRANSPORTS: [(&str, RGBColor); 3] = [
    ("SMT", RGBColor(214, 39, 40)),
    ("TLS/TCP", RGBColor(31, 119, 180)),
    ("TCP", RGBColor(127, 127, 127)),
];

/// Draws `cells` (the run phases; load is left out) into `path`.
pub fn fig8(path: &Path, title: &str, cells: &[Cell]) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let workloads: Vec<&str> = ["A", "B", "C", "D"]
        .into_iter()
        .filter(|w| cells.iter().any(|c| c.workload == *w))
        .collect();
    let mut sizes: Vec<usize> = cells.iter().map(|c| c.value_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if workloads.is_empty() || sizes.is_empty() {
        return Err("nothing to plot".into());
    }
    let top = cells.iter().map(|c| c.ops_per_s / 1e3).fold(0.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (300 * workloads.len() as u32 + 60, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, workloads.len()));
    for (i, (panel, w)) in panels.iter().zip(&workloads).enumerate() {
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("YCSB {w}"), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(if i == 0 { 55 } else { 40 })
            .build_cartesian_2d(0.0..sizes.len() as f64, 0.0..top)
            .map_err(|e| err(&e))?;
        let labels = sizes.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(sizes.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let slot = x - x.floor();
                match labels.get(x.floor() as usize) {
                    Some(&s) if (slot - 0.5).abs() < 0.01 => size_label(s),
                    _ => String::new(),
                }
            })
            .y_desc(if i == 0 { "throughput (kops/s)" } else { "" })
            .draw()
            .map_err(|e| err(&e))?;
        for (t, (name, color)) in TRANSPORTS.iter().enumerate() {
            let bars = sizes.iter().enumerate().filter_map(|(g, &size)| {
                let cell = cells
                    .iter()
                    .find(|c| c.workload == *w && c.value_size == size && c.transport == *name)?;
                let x0 = g as f64 + 0.15 + 0.7 * t as f64 / 3.0;
                let x1 = x0 + 0.7 / 3.0 - 0.02;
                Some(Rectangle::new(
                    [(x0, 0.0), (x1, cell.ops_per_s / 1e3)],
                    color.filled(),
                ))
            });
            let series = chart.draw_series(bars).map_err(|e| err(&e))?;
            if i == 0 {
                let c = *color;
                series.label(*name).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled())
                });
            }
        }
        if i == 0 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(&e))?;
        }
    }
    root.present().map_err(|e| err(&e))
}
