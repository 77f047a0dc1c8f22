//! SVG line plots with plotters (as smt-bench draws its figures): x on a
//! log scale, y linear or logarithmic.

use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One named line of (x, y) points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Labels of a figure.
pub struct Labels<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
}

/// Draws `lines` into `path`, y on a log scale if `log_y`.
pub fn lines(path: &Path, labels: &Labels<'_>, lines: &[Line], log_y: bool) -> Result<(), String> {
    let all = lines.iter().flat_map(|l| l.points.iter());
    let x1 = all.clone().map(|p| p.0).fold(1.0, f64::max) * 1.5;
    let y1 = all.map(|p| p.1).fold(0.0, f64::max);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(labels.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    if log_y {
        let chart = builder.build_cartesian_2d((0.7..x1).log_scale(), (0.7..y1 * 2.0).log_scale());
        draw(chart.map_err(|e| e.to_string())?, labels, lines)?;
    } else {
        let chart = builder.build_cartesian_2d((0.7..x1).log_scale(), 0.0..y1 * 1.1 + 1e-9);
        draw(chart.map_err(|e| e.to_string())?, labels, lines)?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Mesh, lines with points, and legend, on either kind of y axis.
fn draw<'a, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<LogCoord<f64>, Y>>,
    labels: &Labels<'_>,
    lines: &[Line],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| e.to_string();
    chart
        .configure_mesh()
        .x_desc(labels.x)
        .y_desc(labels.y)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, line) in lines.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                c.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(line.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(line.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))
}
