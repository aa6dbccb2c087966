//! Main text from a parsed page: boilerplate subtrees removed, the main-content
//! container chosen, blocks rendered as lines, link-heavy blocks dropped.
//!
//! The rules, in order:
//! 1. Dropped with their content: script/style/form controls/embeds, `nav`, `aside`,
//!    `footer`, `menu`, hidden elements (`hidden`, `aria-hidden`, `display:none`), and
//!    elements whose class, id or ARIA role names boilerplate (navigation, menus,
//!    comments, share buttons, cookie banners, ads, related links, …) — unless such an
//!    element holds most of the page's text, which means it is a page-wide wrapper.
//! 2. Main container: among `article`, `main`, `role=main`, `itemprop=articleBody` and
//!    elements whose class/id says content/article/post/entry, the one with the most
//!    clean text, when it holds a fair share of the body's clean text; else the body.
//! 3. Rendering: block elements start lines, `<br>` breaks lines, list items get "- ",
//!    table cells of a row are joined with " | ", `<pre>` keeps its whitespace.
//! 4. A line whose text is mostly link text is dropped (menus and tag clouds that
//!    escaped rule 1), unless the page is a link index: when the dropped lines hold
//!    over `link_index_ratio` times the text of the rest, they are the content
//!    (tables of contents, indexes of terms) and are kept, as trafilatura keeps them.

use crate::html::{BOILER, CONTENT, Event, HIDDEN, Kind, Page, SEMANTIC_BOILER};

/// Extraction settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// A boilerplate-marked element holding more than this share of the body's text is
    /// kept (it is a wrapper, not a sidebar).
    pub wrapper_share: f64,
    /// A content container is chosen when it holds at least this share of the body's
    /// clean text.
    pub container_share: f64,
    /// Lines whose link text exceeds this share of their text are dropped.
    pub max_link_density: f64,
    /// When the text of the lines dropped for their links is more than this many times
    /// the text kept, the page is a link index (a table of contents, an index of
    /// terms): it is rendered again with its link lines, as trafilatura keeps them
    /// (when those lines hold at least 200 non-space bytes).
    pub link_index_ratio: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            wrapper_share: 0.5,
            container_share: 0.25,
            max_link_density: 0.5,
            link_index_ratio: 4.0,
        }
    }
}

/// Below this many bytes the result of the strict pass is compared with a pass that
/// ignores class/id rules (trafilatura's MIN_EXTRACTED_SIZE is the same 250).
const RECOVER_BELOW: usize = 250;

/// The main text of a page ("" when there is none). When the class/id boilerplate rules
/// leave almost nothing, they were wrong for this page (a site that names its content
/// `textshared…`, say): the page is extracted again without them, and that text wins
/// when it is over twice as long, as trafilatura falls back to a second extractor.
pub fn main_text(page: &Page, opts: &Options) -> String {
    let text = extract_pass(page, opts, true);
    if text.len() >= RECOVER_BELOW {
        return text;
    }
    let relaxed = extract_pass(page, opts, false);
    if relaxed.len() > 2 * text.len() {
        relaxed
    } else {
        text
    }
}

fn extract_pass(page: &Page, opts: &Options, class_rules: bool) -> String {
    let n = page.nodes.len();
    if n == 0 {
        return render(page, 0, page.events.len(), &[], opts);
    }
    // Raw text per subtree (children have larger ids than their parents).
    let mut raw = vec![0u64; n];
    for id in (0..n).rev() {
        let node = &page.nodes[id];
        raw[id] += u64::from(node.own_text);
        if let Some(p) = parent(node.parent) {
            raw[p] += raw[id];
        }
    }
    let root_raw = match page.body {
        Some(b) => raw[b as usize],
        None => (0..n)
            .filter(|&i| parent(page.nodes[i].parent).is_none())
            .map(|i| raw[i])
            .sum(),
    }
    .max(1);
    // Removal, then clean text per subtree.
    let boiler = if class_rules {
        BOILER | SEMANTIC_BOILER
    } else {
        SEMANTIC_BOILER
    };
    let mut removed = vec![false; n];
    for id in 0..n {
        let node = &page.nodes[id];
        let inherited = parent(node.parent).is_some_and(|p| removed[p]);
        let share = raw[id] as f64 / root_raw as f64;
        removed[id] = inherited
            || node.kind == Kind::Skip
            || node.flags & HIDDEN != 0
            || node.flags & boiler != 0 && share <= opts.wrapper_share;
    }
    let mut clean = vec![0u64; n];
    for id in (0..n).rev() {
        if removed[id] {
            continue;
        }
        let node = &page.nodes[id];
        clean[id] += u64::from(node.own_text - node.own_link.min(node.own_text));
        if let Some(p) = parent(node.parent) {
            clean[p] += clean[id];
        }
    }
    let (root_clean, mut range) = match page.body {
        Some(b) => {
            let node = &page.nodes[b as usize];
            (
                clean[b as usize],
                (node.open as usize, node.close as usize + 1),
            )
        }
        None => (
            (0..n)
                .filter(|&i| parent(page.nodes[i].parent).is_none())
                .map(|i| clean[i])
                .sum(),
            (0, page.events.len()),
        ),
    };
    let best = (0..n)
        .filter(|&i| page.nodes[i].flags & CONTENT != 0 && !removed[i])
        .max_by_key(|&i| (clean[i], std::cmp::Reverse(i)));
    if let Some(best) = best
        && clean[best] as f64 >= opts.container_share * root_clean.max(1) as f64
    {
        let node = &page.nodes[best];
        range = (node.open as usize, node.close as usize + 1);
    }
    render(
        page,
        range.0,
        range.1.min(page.events.len()),
        &removed,
        opts,
    )
}

fn parent(p: u32) -> Option<usize> {
    (p != u32::MAX).then_some(p as usize)
}

/// Collects lines of text.
struct Lines<'a> {
    out: String,
    line: String,
    /// Non-space bytes of the line, and of them inside links.
    solid: usize,
    linked: usize,
    prefix: &'static str,
    opts: &'a Options,
    /// Cells on the line so far (for " | " between cells).
    cells: usize,
    /// Non-space bytes of the lines written, and of the lines dropped for their links.
    kept: usize,
    dropped: usize,
    /// Keep link-heavy lines too.
    keep_links: bool,
    /// The line is preformatted: keep its leading whitespace.
    indent: bool,
}

impl Lines<'_> {
    fn flush(&mut self) {
        let line = self.line.trim_end();
        // Table rows are kept whatever their links, as the reference extractor keeps
        // tables; other lines must be mostly text.
        let text_enough = self.keep_links
            || self.cells > 0
            || (self.linked as f64) <= self.opts.max_link_density * self.solid as f64;
        if !text_enough {
            self.dropped += self.solid;
        }
        if self.solid > 0 && text_enough {
            self.kept += self.solid;
            if !self.out.is_empty() {
                self.out.push('\n');
            }
            self.out.push_str(self.prefix);
            self.out
                .push_str(if self.indent { line } else { line.trim_start() });
        }
        self.indent = false;
        self.line.clear();
        self.solid = 0;
        self.linked = 0;
        self.prefix = "";
        self.cells = 0;
    }

    fn push(&mut self, text: &str, link: bool, pre: bool) {
        let mut solid = 0;
        if pre {
            for (i, part) in text.split('\n').enumerate() {
                if i > 0 {
                    self.flush();
                }
                solid += part.bytes().filter(|b| !b.is_ascii_whitespace()).count();
                self.indent = true;
                self.line.push_str(part.trim_end_matches('\r'));
                self.count(solid, link);
                solid = 0;
            }
            return;
        }
        let mut space = text.starts_with(|c: char| c.is_whitespace());
        for word in text.split(|c: char| c.is_whitespace()) {
            if word.is_empty() {
                space = true;
                continue;
            }
            if space && !self.line.is_empty() && !self.line.ends_with(' ') {
                self.line.push(' ');
            }
            self.line.push_str(word);
            solid += word.len();
            space = true;
        }
        if text.ends_with(|c: char| c.is_whitespace())
            && !self.line.is_empty()
            && !self.line.ends_with(' ')
        {
            self.line.push(' ');
        }
        self.count(solid, link);
    }

    fn count(&mut self, solid: usize, link: bool) {
        self.solid += solid;
        if link {
            self.linked += solid;
        }
    }
}

/// Link text a page must drop before it can count as a link index (a menu of a few
/// links beside no text is boilerplate, not an index).
const LINK_INDEX_MIN: usize = 200;

fn render(page: &Page, from: usize, to: usize, removed: &[bool], opts: &Options) -> String {
    let (text, kept, dropped) = render_lines(page, from, to, removed, opts, false);
    if dropped >= LINK_INDEX_MIN && dropped as f64 > opts.link_index_ratio * kept as f64 {
        return render_lines(page, from, to, removed, opts, true).0;
    }
    text
}

fn render_lines(
    page: &Page,
    from: usize,
    to: usize,
    removed: &[bool],
    opts: &Options,
    keep_links: bool,
) -> (String, usize, usize) {
    let mut lines = Lines {
        out: String::new(),
        line: String::new(),
        solid: 0,
        linked: 0,
        prefix: "",
        opts,
        cells: 0,
        indent: false,
        kept: 0,
        dropped: 0,
        keep_links,
    };
    let mut pre = 0u32;
    let mut i = from;
    while i < to {
        match page.events[i] {
            Event::Open(id) => {
                let node = &page.nodes[id as usize];
                if removed.get(id as usize).copied().unwrap_or(false) {
                    // Skip the subtree; a removed block still separates lines.
                    if node.kind != Kind::Inline && node.kind != Kind::Link {
                        lines.flush();
                    }
                    i = node.close as usize + 1;
                    continue;
                }
                match node.kind {
                    Kind::Block => lines.flush(),
                    Kind::Item => {
                        lines.flush();
                        lines.prefix = "- ";
                    }
                    Kind::Cell => {
                        if lines.cells > 0 && lines.solid > 0 {
                            lines.line.push_str(" | ");
                        }
                        lines.cells += 1;
                    }
                    Kind::Pre => {
                        lines.flush();
                        pre += 1;
                    }
                    Kind::Inline | Kind::Link | Kind::Skip => {}
                }
            }
            Event::Close(id) => match page.nodes[id as usize].kind {
                Kind::Block | Kind::Item => lines.flush(),
                Kind::Pre => {
                    lines.flush();
                    pre = pre.saturating_sub(1);
                }
                _ => {}
            },
            Event::Text { start, end, link } => {
                lines.push(&page.text[start as usize..end as usize], link, pre > 0);
            }
            Event::Break => lines.flush(),
        }
        i += 1;
    }
    lines.flush();
    (lines.out, lines.kept, lines.dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::parse;

    fn text(html: &str) -> String {
        main_text(&parse(html, 1_000_000), &Options::default())
    }

    #[test]
    fn boilerplate_is_removed_and_structure_kept() {
        let html = r##"<html><head><title>T</title><style>p{}</style></head><body>
            <nav><a href="/">Home</a> <a href="/x">About</a></nav>
            <div class="cookie-banner">We use cookies. <button>OK</button></div>
            <article><h1>The title</h1>
              <p>First paragraph with <b>bold</b> and
              a line<br>break.</p>
              <ul><li>one</li><li>two <a href="#">link</a> item</li></ul>
              <table><tr><td>a</td><td>b</td></tr></table>
              <pre>code  line 1
  line 2</pre>
            </article>
            <div id="comments"><p>A comment.</p></div>
            <footer>Copyright</footer></body></html>"##;
        assert_eq!(
            text(html),
            "The title\nFirst paragraph with bold and a line\nbreak.\n- one\n- two link item\na | b\ncode  line 1\n  line 2"
        );
    }

    #[test]
    fn link_lists_are_dropped() {
        let html = r##"<body><div><p>Real text of the page, long enough to matter here.</p>
            <p><a href="/1">Related one</a> | <a href="/2">Related two</a></p></div></body>"##;
        assert_eq!(
            text(html),
            "Real text of the page, long enough to matter here."
        );
    }

    #[test]
    fn link_indexes_keep_their_links() {
        // A table of contents: nearly all of the page is links, so they are the content.
        let mut html = String::from("<body><h1>Table of Contents</h1><ul>");
        for k in 1..=20 {
            html.push_str(&format!(
                r#"<li><a href="/ch{k}">Chapter {k}: working with the pipeline</a></li>"#
            ));
        }
        html.push_str("</ul></body>");
        let got = text(&html);
        assert!(
            got.starts_with("Table of Contents\n- Chapter 1: working"),
            "{got}"
        );
        assert_eq!(got.lines().count(), 21);
        // A few menu links beside no text stay out.
        assert_eq!(
            text(r#"<body><p><a href="/">Home</a> <a href="/a">About</a></p></body>"#),
            ""
        );
    }

    #[test]
    fn wrappers_with_boilerplate_names_are_kept() {
        let html = r#"<body><div class="page-with-sidebar"><p>All of the text is in here and it is long.</p></div>
            <div class="sidebar">short</div></body>"#;
        assert_eq!(text(html), "All of the text is in here and it is long.");
    }

    #[test]
    fn no_body_and_plain_text() {
        assert_eq!(text("just text &lt;3"), "just text <3");
        assert_eq!(text(""), "");
    }
}
