//! SVG line plots of the figures (plotters).

use plotters::prelude::*;
use std::path::Path;

/// One named line of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Error bars (half-widths), if any, per point.
    pub spread: Option<Vec<f64>>,
}

const COLOURS: [RGBColor; 6] = [BLACK, RED, BLUE, GREEN, MAGENTA, RGBColor(230, 140, 0)];

/// Draw `series` into `path` (SVG) with the given title and axis labels.
pub fn lines(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    for s in series {
        if let Some(sp) = &s.spread {
            for (&(_, y), e) in s.points.iter().zip(sp) {
                y1 = y1.max(y + e);
            }
        }
    }
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, (y0 - pad).min(0.0)..(y1 + pad))?;
    c.configure_mesh().x_desc(xlabel).y_desc(ylabel).draw()?;
    for (i, s) in series.iter().enumerate() {
        let col = COLOURS[i % COLOURS.len()];
        c.draw_series(LineSeries::new(
            s.points.iter().copied(),
            col.stroke_width(2),
        ))?
        .label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
        if let Some(sp) = &s.spread {
            c.draw_series(s.points.iter().zip(sp).map(|(&(x, y), &e)| {
                PathElement::new(vec![(x, y - e), (x, y + e)], col.stroke_width(1))
            }))?;
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}
