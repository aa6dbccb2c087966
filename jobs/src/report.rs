//! `mill report`: one self-contained HTML file (inline SVG, no script, no network) with
//! the funnel of documents through the steps, drop reasons per step, the language
//! distribution, text-length histograms before and after, dedup cluster sizes, tokens
//! per shard and the loss curve of a train step.

use std::collections::BTreeMap;
use std::fmt::Write;

use pipeline::shard::ParquetReader;
use pipeline::{Location, Result, Storage};

use crate::spec::Kind;
use crate::status::{StepStatus, status};

/// Documents read at most for the language chart.
pub const LANGUAGE_SAMPLE: usize = 200_000;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A horizontal bar chart as inline SVG.
/// Languages a step's table shows, those with the most documents first.
pub const LANGUAGE_ROWS: usize = 40;

/// The `n` languages of `stats` with the most documents in, most first (ties by name).
pub fn language_rows(
    stats: &pipeline::stats::Stats,
    n: usize,
) -> Vec<(&String, &pipeline::stats::LanguageStats)> {
    let mut rows: Vec<_> = stats.languages.iter().collect();
    rows.sort_by(|a, b| b.1.docs_in.cmp(&a.1.docs_in).then(a.0.cmp(b.0)));
    rows.truncate(n);
    rows
}

pub fn bar_chart(title: &str, items: &[(String, f64)], unit: &str) -> String {
    let row = 22.0;
    let label_w = 230.0;
    let bar_w = 520.0;
    let height = 40.0 + row * items.len().max(1) as f64;
    let max = items.iter().map(|i| i.1).fold(0.0f64, f64::max).max(1e-9);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><figcaption>{}</figcaption><svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" role="img" aria-label="{}">"#,
        esc(title),
        label_w + bar_w + 120.0,
        esc(title)
    );
    if items.is_empty() {
        let _ = write!(s, r#"<text x="10" y="28" class="empty">no data</text>"#);
    }
    for (k, (label, value)) in items.iter().enumerate() {
        let y = 20.0 + row * k as f64;
        let w = (value / max * bar_w).max(if *value > 0.0 { 1.0 } else { 0.0 });
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{label_w}" y="{y}" width="{w:.1}" height="{}" class="bar"><title>{}: {}</title></rect><text x="{}" y="{}">{}{}</text>"#,
            label_w - 8.0,
            y + 15.0,
            esc(label),
            row - 6.0,
            esc(label),
            value,
            label_w + w + 6.0,
            y + 15.0,
            fmt_num(*value),
            esc(unit)
        );
    }
    s.push_str("</svg></figure>\n");
    s
}

/// One line of a [`line_chart`]: its name, its colour, its (x, y) points.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// Lines of (x, y) points as inline SVG: one polyline per series, its points' values
/// in tooltips; axes labelled with their ranges.
pub fn line_chart(title: &str, x_label: &str, series: &[Series<'_>]) -> String {
    let (w, h, left, bottom) = (640.0, 260.0, 60.0, 30.0);
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        if x.is_finite() && y.is_finite() {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
    }
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<figure><figcaption>{}</figcaption><svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" role="img" aria-label="{}">"#,
        esc(title),
        w + left + 20.0,
        h + bottom + 20.0,
        esc(title)
    );
    if x0 > x1 {
        s.push_str(r#"<text x="10" y="28" class="empty">no data</text></svg></figure>"#);
        s.push('\n');
        return s;
    }
    let (xs, ys) = ((x1 - x0).max(1e-9), (y1 - y0).max(1e-9));
    let px = |x: f64| left + (x - x0) / xs * w;
    let py = |y: f64| 10.0 + (1.0 - (y - y0) / ys) * h;
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#999"/><line x1="{left}" y1="10" x2="{left}" y2="{}" stroke="#999"/><text x="{}" y="{}" text-anchor="end">{}</text><text x="{}" y="{}" text-anchor="end">{}</text><text x="{left}" y="{}">{}</text><text x="{}" y="{}" text-anchor="end">{} {}</text>"##,
        h + 10.0,
        left + w,
        h + 10.0,
        h + 10.0,
        left - 6.0,
        14.0,
        fmt_num((y1 * 1000.0).round() / 1000.0),
        left - 6.0,
        h + 10.0,
        fmt_num((y0 * 1000.0).round() / 1000.0),
        h + 26.0,
        fmt_num(x0),
        left + w,
        h + 26.0,
        esc(x_label),
        fmt_num(x1),
    );
    for (
        k,
        Series {
            name,
            color,
            points: pts,
        },
    ) in series.iter().enumerate()
    {
        let coords: Vec<String> = pts
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"><title>{}</title></polyline><text x="{}" y="{}" fill="{color}">{}</text>"#,
            coords.join(" "),
            esc(name),
            left + w - 150.0,
            24.0 + 16.0 * k as f64,
            esc(name)
        );
        if pts.len() <= 60 {
            for &(x, y) in pts.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{color}"><title>{}: step {}, {:.4}</title></circle>"#,
                    px(x),
                    py(y),
                    esc(name),
                    fmt_num(x),
                    y
                );
            }
        }
    }
    s.push_str("</svg></figure>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn bucket_label(k: u8) -> String {
    if k == 0 {
        "empty".to_string()
    } else {
        // [2^(k-1), 2^k) bytes.
        format!("{}–{} B", human(1u64 << (k - 1)), human(1u64 << k))
    }
}

fn human(n: u64) -> String {
    match n {
        0..1024 => n.to_string(),
        1024..1_048_576 => format!("{}k", n >> 10),
        _ => format!("{}M", n >> 20),
    }
}

/// Writes the report of the run at `run`; returns the HTML.
pub fn report(storage: &Storage, run: &Location) -> Result<String> {
    let (p, steps) = status(storage, run)?;
    let kinds: Vec<Kind> = p.steps.iter().map(|s| s.kind()).collect::<Result<_>>()?;
    let mut html = String::new();
    let _ = write!(
        html,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>tokenmill run report</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}} h1{{font-size:1.5em}} h2{{font-size:1.15em;margin-top:2em}}
table{{border-collapse:collapse}} td,th{{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}} td:first-child,th:first-child,td:nth-child(2){{text-align:left}}
figure{{margin:1em 0}} figcaption{{font-weight:600;margin-bottom:4px}} svg text{{font:12px system-ui,sans-serif;fill:#333}} .bar{{fill:#3b7dd8}} .empty{{fill:#999}}
</style></head><body><h1>tokenmill run report</h1><p>run <code>{}</code></p>
"#,
        esc(&run.to_string())
    );
    if p.ablation.is_some() {
        html.push_str(&ablation_section(storage, &p)?);
    }
    html.push_str(&steps_table(&steps));

    // Funnel: documents into the first document step, then out of each.
    let mut funnel = Vec::new();
    let doc_steps: Vec<(&StepStatus, Kind)> = steps
        .iter()
        .zip(&kinds)
        .filter(|(_, k)| k.writes_documents())
        .map(|(s, k)| (s, *k))
        .collect();
    if let Some((first, _)) = doc_steps.first() {
        // Pages, not records: a crawl's warcinfo, request and metadata records are
        // counted apart (and said under the chart).
        funnel.push(("input".to_string(), first.stats.docs_in as f64));
    }
    for (s, _) in &doc_steps {
        funnel.push((format!("after {}", s.name), s.stats.docs_out as f64));
    }
    html.push_str("<h2>Documents through the steps</h2>\n");
    html.push_str(&bar_chart(
        "Funnel: documents kept after each step",
        &funnel,
        " docs",
    ));
    if let Some(line) = doc_steps.first().and_then(|(s, _)| s.stats.records_line()) {
        let _ = writeln!(
            html,
            "<p>Step {}: {} (the funnel starts from the pages).</p>",
            esc(&doc_steps[0].0.name),
            esc(&line)
        );
    }

    let timed: Vec<(&str, String)> = doc_steps
        .iter()
        .filter_map(|(s, _)| s.stats.stage_time_line().map(|l| (s.name.as_str(), l)))
        .collect();
    if !timed.is_empty() {
        html.push_str("<h2>Where the time goes</h2>\n<ul>\n");
        for (name, line) in timed {
            let _ = writeln!(html, "<li>Step {}: {}</li>", esc(name), esc(&line));
        }
        html.push_str("</ul>\n");
    }

    html.push_str("<h2>Drop reasons</h2>\n");
    for (s, _) in &doc_steps {
        let items: Vec<(String, f64)> = s
            .stats
            .drops
            .iter()
            .map(|(r, n)| (r.clone(), *n as f64))
            .collect();
        html.push_str(&bar_chart(
            &format!("Step {}: documents dropped, by reason", s.name),
            &items,
            "",
        ));
    }

    // Changes stages counted without dropping (PII replaced, by kind).
    let counted: Vec<&StepStatus> = doc_steps
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| !s.stats.counts.is_empty())
        .collect();
    if !counted.is_empty() {
        html.push_str("<h2>Changes in kept text</h2>\n");
        for s in counted {
            let items: Vec<(String, f64)> = s
                .stats
                .counts
                .iter()
                .map(|(k, n)| (k.clone(), *n as f64))
                .collect();
            html.push_str(&bar_chart(
                &format!(
                    "Step {}: changes counted (PII replaced, documents each evaluation set caught, bytes cut)",
                    s.name
                ),
                &items,
                "",
            ));
        }
    }

    html.push_str("<h2>Languages</h2>\n");
    let last_docs = p
        .steps
        .iter()
        .zip(&kinds)
        .rfind(|(_, k)| k.writes_documents())
        .map(|(s, _)| s.name.clone());
    let mut langs: BTreeMap<String, u64> = BTreeMap::new();
    let mut sampled = 0usize;
    if let Some(name) = &last_docs {
        let out = p.step_output(name)?;
        for meta in storage.list(&out)? {
            if sampled >= LANGUAGE_SAMPLE {
                break;
            }
            if meta.relative.split('/').any(|x| x.starts_with(['_', '.']))
                || !meta.relative.ends_with(".parquet")
            {
                continue;
            }
            let reader = match ParquetReader::open(storage, &meta, "", 8192)? {
                Ok(r) => r,
                Err(_) => continue,
            };
            for batch in reader {
                for d in batch?.docs {
                    *langs
                        .entry(d.language.unwrap_or_else(|| "unknown".into()))
                        .or_default() += 1;
                    sampled += 1;
                }
            }
        }
    }
    let mut lang_items: Vec<(String, f64)> =
        langs.into_iter().map(|(l, n)| (l, n as f64)).collect();
    lang_items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    lang_items.truncate(40);
    html.push_str(&bar_chart(
        &format!(
            "Language of the final documents ({}{} documents read)",
            if sampled >= LANGUAGE_SAMPLE {
                "first "
            } else {
                ""
            },
            sampled
        ),
        &lang_items,
        " docs",
    ));

    // Each document step's counts by language (those with a language when judged).
    for (s, _) in &doc_steps {
        if s.stats.languages.is_empty() {
            continue;
        }
        let _ = writeln!(
            html,
            "<h3>Step {}: documents by language</h3>\n<table><tr><th>language</th>\
             <th>in</th><th>kept</th><th>kept %</th><th>drop reasons</th></tr>",
            esc(&s.name)
        );
        for (language, l) in language_rows(&s.stats, LANGUAGE_ROWS) {
            let reasons = l
                .drops
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
                esc(language),
                l.docs_in,
                l.docs_out,
                100.0 * l.docs_out as f64 / l.docs_in.max(1) as f64,
                esc(&reasons)
            );
        }
        html.push_str("</table>\n");
        if s.stats.languages.len() > LANGUAGE_ROWS {
            let _ = writeln!(
                html,
                "<p>{} more languages (the {LANGUAGE_ROWS} with the most documents shown).</p>",
                s.stats.languages.len() - LANGUAGE_ROWS
            );
        }
    }

    html.push_str("<h2>Text length</h2>\n");
    if let (Some((first, _)), Some((last, _))) = (doc_steps.first(), doc_steps.last()) {
        let hist = |h: &BTreeMap<u8, u64>| -> Vec<(String, f64)> {
            h.iter()
                .map(|(k, n)| (bucket_label(*k), *n as f64))
                .collect()
        };
        html.push_str(&bar_chart(
            &format!(
                "Before: text length of the documents step {} looked at (after extraction)",
                first.name
            ),
            &hist(&first.stats.length_in),
            " docs",
        ));
        html.push_str(&bar_chart(
            &format!(
                "After: text length of the documents step {} kept",
                last.name
            ),
            &hist(&last.stats.length_out),
            " docs",
        ));
    } else {
        html.push_str(&bar_chart("Text length", &[], ""));
    }

    html.push_str("<h2>Classifier scores</h2>\n");
    html.push_str(&scores_section(&steps));

    html.push_str("<h2>Dedup clusters</h2>\n");
    html.push_str(&charts_of(
        &p,
        &kinds,
        Kind::DedupClusters,
        "dedup",
        |out| {
            let s = dedup::clusters::read_summary(storage, out).ok()?;
            let items = s
                .sizes
                .iter()
                .map(|(size, n)| (format!("{size} documents"), *n as f64));
            Some(("clusters by size", items.collect(), " clusters"))
        },
    )?);
    html.push_str("<h2>Token shards</h2>\n");
    html.push_str(&charts_of(
        &p,
        &kinds,
        Kind::TokenizeEncode,
        "tokenize",
        |out| {
            let m = tokenize::read_manifest(storage, out).ok()?;
            let items = m.shards.iter().map(|s| (s.name.clone(), s.tokens as f64));
            Some(("tokens per shard", items.collect(), " tokens"))
        },
    )?);
    html.push_str("<h2>Training</h2>\n");
    let mut trained = false;
    for (spec, k) in p.steps.iter().zip(&kinds) {
        if *k != Kind::Train {
            continue;
        }
        trained = true;
        let curve = crate::train::loss_curve(storage, &p.step_output(&spec.name)?)?;
        let train: Vec<(f64, f64)> = curve
            .iter()
            .map(|c| (c.step as f64 + 1.0, c.loss))
            .collect();
        let val: Vec<(f64, f64)> = curve
            .iter()
            .filter_map(|c| Some((c.step as f64 + 1.0, c.val_loss?)))
            .collect();
        let mut series = vec![Series {
            name: "training loss",
            color: "#3b7dd8",
            points: train,
        }];
        if !val.is_empty() {
            series.push(Series {
                name: "validation loss",
                color: "#d8703b",
                points: val,
            });
        }
        html.push_str(&line_chart(
            &format!("Step {}: loss by training step", spec.name),
            "step",
            &series,
        ));
    }
    if !trained {
        html.push_str(&bar_chart("No train step in this pipeline", &[], ""));
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// Colours of the variants' lines, in order (then again).
const COLORS: &[&str] = &[
    "#3b7dd8", "#d8703b", "#3ba55c", "#a33bd8", "#d83b5e", "#8c7a3b", "#3bb8d8", "#555555",
];

/// An ablation's comparison: its variants' figures in a table (mean and spread over the
/// seeds), each variant's funnel, and the curves of every model on one chart per loss.
fn ablation_section(storage: &Storage, p: &crate::spec::Pipeline) -> Result<String> {
    let Some(plan) = &p.ablation else {
        return Ok(String::new());
    };
    let results = crate::ablate::results(storage, p)?;
    let mut html = String::new();
    let _ = writeln!(
        html,
        "<h2>Ablation: {} variants, {} tokens each ({} steps of {}), seeds {:?}</h2>",
        results.len(),
        human(plan.tokens),
        plan.steps,
        plan.tokens_per_step,
        plan.seeds
    );
    let sets: std::collections::BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.seeds.iter().flat_map(|s| s.eval_losses.keys()))
        .collect();
    html.push_str("<table><tr><th>variant</th><th>documents</th><th>tokens</th><th>data for the budget</th><th>training loss</th><th>own validation loss</th>");
    for set in &sets {
        let _ = write!(html, "<th>loss on {}</th>", esc(set));
    }
    let tasks: std::collections::BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.seeds.iter().flat_map(|s| s.tasks.keys()))
        .collect();
    for task in &tasks {
        let _ = write!(html, "<th>{0} acc</th><th>{0} acc_norm</th>", esc(task));
    }
    html.push_str("</tr>\n");
    let cell = |x: Option<(f64, f64)>| match x {
        Some((m, d)) if d > 0.0 => format!("{m:.4} ± {:.4}", d / 2.0),
        Some((m, _)) => format!("{m:.4}"),
        None => "-".into(),
    };
    for r in &results {
        let data = match r.data_over_budget {
            Some(x) if x >= 1.0 => format!("cut to {:.0}%", 100.0 / x),
            Some(x) if x > 0.0 => format!("repeated {:.2}×", 1.0 / x),
            _ => "-".into(),
        };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(&r.name),
            r.funnel.last().map_or("-".into(), |f| human(f.docs_out)),
            r.tokens.map_or("-".into(), human),
            data,
            cell(crate::ablate::mean_spread(
                r.seeds.iter().map(|s| s.train_loss)
            )),
            cell(crate::ablate::mean_spread(
                r.seeds.iter().map(|s| s.val_loss)
            )),
        );
        for set in &sets {
            let v = crate::ablate::mean_spread(
                r.seeds.iter().map(|s| s.eval_losses.get(*set).copied()),
            );
            let _ = write!(html, "<td>{}</td>", cell(v));
        }
        for task in &tasks {
            for f in [
                |t: &crate::train::TaskScore| t.acc,
                |t: &crate::train::TaskScore| t.acc_norm,
            ] {
                let v = crate::ablate::mean_spread(
                    r.seeds.iter().map(|s| Some(f(s.tasks.get(*task)?))),
                );
                let _ = write!(html, "<td>{}</td>", cell(v));
            }
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table><p>± half the spread (largest less smallest) over the seeds. The own validation loss is each variant's held-out share of its own data: it does not compare variants; the reference sets do.</p>\n");
    // Funnels: each variant's document steps.
    html.push_str("<table><tr><th>variant</th><th>step</th><th>ran as</th><th>documents in</th><th>documents out</th></tr>\n");
    for r in &results {
        for f in &r.funnel {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.name),
                esc(&f.step),
                esc(&f.ran_as),
                human(f.docs_in),
                human(f.docs_out)
            );
        }
    }
    html.push_str("</table>\n");
    // Curves: every model's, coloured by variant.
    let mut curves = Vec::new();
    for (k, (v, r)) in plan.variants.iter().zip(&results).enumerate() {
        for (seed, step) in r.seeds.iter().map(|s| s.seed).zip(&v.train_steps) {
            let curve = crate::train::loss_curve(storage, &p.step_output(step)?)?;
            curves.push((
                format!("{} seed {seed}", v.name),
                COLORS[k % COLORS.len()],
                curve,
            ));
        }
    }
    let chart = |title: &str, y: &dyn Fn(&crate::train::Point) -> Option<f64>| {
        let series: Vec<Series<'_>> = curves
            .iter()
            .map(|(name, color, curve)| Series {
                name,
                color,
                points: curve
                    .iter()
                    .filter_map(|c| Some((c.step as f64 + 1.0, y(c)?)))
                    .collect(),
            })
            .collect();
        line_chart(title, "step", &series)
    };
    html.push_str(&chart("Training loss of every model", &|c| Some(c.loss)));
    for set in &sets {
        html.push_str(&chart(&format!("Loss on {set} of every model"), &|c| {
            c.eval_losses.get(*set).copied()
        }));
    }
    Ok(html)
}

/// Per step that measured scores, a histogram per classifier, and the thresholds of
/// the steps that set them (`classify.threshold`).
fn scores_section(steps: &[StepStatus]) -> String {
    let mut html = String::new();
    for s in steps {
        for line in crate::status::threshold_lines(&s.stats) {
            let _ = writeln!(html, "<p>Step {}: {}</p>", esc(&s.name), esc(&line));
        }
        for (name, h) in &s.stats.histograms {
            let width = (h.hi - h.lo) / h.counts.len().max(1) as f64;
            let items: Vec<(String, f64)> = h
                .counts
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let a = h.lo + width * i as f64;
                    (
                        format!("{} – {}", fmt_num(a), fmt_num(a + width)),
                        *n as f64,
                    )
                })
                .collect();
            html.push_str(&bar_chart(
                &format!(
                    "Step {}: {name} of {} documents (every document scored, kept or not)",
                    s.name,
                    h.total()
                ),
                &items,
                " docs",
            ));
        }
    }
    if html.is_empty() {
        html.push_str(&bar_chart("No classifier in this pipeline", &[], ""));
    }
    html
}

/// A chart per step of `kind`, from what `read` finds in its output: (what, bars, unit).
type Chart = (&'static str, Vec<(String, f64)>, &'static str);

fn charts_of(
    p: &crate::spec::Pipeline,
    kinds: &[Kind],
    kind: Kind,
    stage: &str,
    read: impl Fn(&Location) -> Option<Chart>,
) -> Result<String> {
    let mut html = String::new();
    for (spec, k) in p.steps.iter().zip(kinds) {
        if *k != kind {
            continue;
        }
        let (what, items, unit) =
            read(&p.step_output(&spec.name)?).unwrap_or(("no output yet", Vec::new(), ""));
        html.push_str(&bar_chart(
            &format!("Step {}: {what}", spec.name),
            &items,
            unit,
        ));
    }
    if html.is_empty() {
        html = bar_chart(&format!("No {stage} step in this pipeline"), &[], "");
    }
    Ok(html)
}

fn steps_table(steps: &[StepStatus]) -> String {
    let mut s = String::from(
        "<table><tr><th>step</th><th>what</th><th>done</th><th>docs in</th><th>docs out</th><th>bytes out</th></tr>\n",
    );
    for st in steps {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&st.name),
            esc(&st.kind),
            st.done,
            st.total.map_or("?".to_string(), |t| t.to_string()),
            st.stats.docs_in,
            st.stats.docs_out,
            st.stats.bytes_out
        );
    }
    s.push_str("</table>\n");
    for st in steps.iter().filter(|st| st.not_inputs > 0) {
        let _ = writeln!(
            s,
            "<p>Step {}: {} files of its input are not inputs of the step (not_an_input).</p>",
            esc(&st.name),
            st.not_inputs
        );
    }
    s
}
