//! A tolerant HTML tokenizer and a flat tree: the page becomes a list of events
//! (open, text, line break, close) over an arena of element nodes. No DOM of attribute
//! maps is built: while tokenizing we keep only what extraction looks at (the tag, and
//! whether class/id/role/hidden mark the element as boilerplate, hidden or content).
//!
//! Work is linear in the page size: end tags look at most `END_TAG_SEARCH` (64) levels
//! down the stack, nesting deeper than [`MAX_DEPTH`] is flattened, and a page over the
//! tag budget stops being parsed (the caller drops it as too complex).

/// Deepest element nesting kept; deeper start tags are ignored (their text is kept).
pub const MAX_DEPTH: usize = 256;
/// How far down the open-element stack an end tag looks for its start tag.
const END_TAG_SEARCH: usize = 64;

/// What extraction needs to know of a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Inline: text flows through.
    Inline,
    /// A link (its text counts toward link density).
    Link,
    /// Starts a new line/paragraph.
    Block,
    /// A list item (rendered with a leading "- ").
    Item,
    /// A table cell (cells of a row share a line).
    Cell,
    /// Preformatted: whitespace kept.
    Pre,
    /// Never text (script, style, nav, form controls, …): dropped with its content.
    Skip,
}

pub use crate::classes::{CHROME, CONTENT, GROUPS, Group, HIDDEN, POST_BODY};

/// The node's boilerplate group comes from its tag (`nav`, `footer`, …) or ARIA role,
/// not from a class or id.
pub const SEMANTIC: u16 = 16;

/// One element.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: u64,
    pub kind: Kind,
    pub flags: u16,
    /// Boilerplate group its class, id, role or tag names.
    pub group: Group,
    pub parent: u32,
    /// Index of its open and close events.
    pub open: u32,
    pub close: u32,
    /// Non-space bytes of text directly inside / inside links directly inside.
    pub own_text: u32,
    pub own_link: u32,
}

/// A parse event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Open(u32),
    Close(u32),
    /// Text: a range of [`Page::text`], and whether it sits inside a link.
    Text {
        start: u32,
        end: u32,
        link: bool,
    },
    /// A `<br>`.
    Break,
}

/// A parsed page.
#[derive(Debug, Default)]
pub struct Page {
    pub nodes: Vec<Node>,
    pub events: Vec<Event>,
    /// Decoded text of all text events.
    pub text: String,
    /// Node of `<body>` (or the root when there is none).
    pub body: Option<u32>,
    /// Set when the tag budget ran out.
    pub over_budget: bool,
    /// Text of `<title>`, and the `og:title` meta property.
    pub title: Option<String>,
    pub og_title: Option<String>,
    /// Set by the caller when the page's address names a discussion (a forum, a thread,
    /// a topic, questions): its comments are then its posts (see
    /// [`crate::extract::discussion_url`]).
    pub discussion: bool,
    /// Set by the caller when the page's address is a site's front page (its path is
    /// empty or `/`): a home page is not one post (see
    /// [`crate::extract::front_page_url`]).
    pub front_page: bool,
    /// The page says it is an article (`og:type` `article`).
    pub og_article: bool,
    /// Elements that say they are one post or article (hAtom's `hentry`, a schema.org
    /// `Article`, `NewsArticle` or `BlogPosting` item): one on a post's page, one per
    /// post on a blog's index.
    pub entries: u32,
    /// The page says it is a product (an `og:type` naming a product, or a JSON-LD
    /// `"@type": "Product"`): its comments are reviews.
    pub product: bool,
}

const fn h(name: &[u8]) -> u64 {
    // FNV-1a over the lowercase name.
    let mut x: u64 = 0xcbf29ce484222325;
    let mut i = 0;
    while i < name.len() {
        x ^= name[i].to_ascii_lowercase() as u64;
        x = x.wrapping_mul(0x100000001b3);
        i += 1;
    }
    x
}

const P: u64 = h(b"p");
const LI: u64 = h(b"li");
const DT: u64 = h(b"dt");
const DD: u64 = h(b"dd");
const TR: u64 = h(b"tr");
const TD: u64 = h(b"td");
const TH: u64 = h(b"th");
const UL: u64 = h(b"ul");
const OL: u64 = h(b"ol");
const DL: u64 = h(b"dl");
const TABLE: u64 = h(b"table");
const BODY: u64 = h(b"body");
const HTML: u64 = h(b"html");
/// Name hash of `<h1>`.
pub const H1: u64 = h(b"h1");
/// Name hashes of the heading elements.
pub const HEADINGS: [u64; 6] = [H1, h(b"h2"), h(b"h3"), h(b"h4"), h(b"h5"), h(b"h6")];
const HEAD: u64 = h(b"head");
pub(crate) const ARTICLE: u64 = h(b"article");
const MAIN: u64 = h(b"main");
const OPTION: u64 = h(b"option");
const PRE: u64 = h(b"pre");
const CODE: u64 = h(b"code");
const BR: u64 = h(b"br");
const HR: u64 = h(b"hr");

fn kind(name: &[u8]) -> (Kind, bool) {
    // (kind, void)
    match name {
        b"a" => (Kind::Link, false),
        b"p" | b"div" | b"section" | b"article" | b"main" | b"header" | b"h1" | b"h2" | b"h3"
        | b"h4" | b"h5" | b"h6" | b"ul" | b"ol" | b"dl" | b"dt" | b"dd" | b"table" | b"tr"
        | b"thead" | b"tbody" | b"tfoot" | b"caption" | b"blockquote" | b"address" | b"center"
        | b"figcaption" | b"details" | b"summary" | b"body" | b"html" | b"hgroup" | b"dir"
        | b"nav" | b"aside" | b"footer" | b"menu" | b"form" | b"fieldset" | b"figure"
        | b"noframes" | b"legend" | b"noscript" | b"frameset" => (Kind::Block, false),
        b"li" => (Kind::Item, false),
        b"td" | b"th" => (Kind::Cell, false),
        b"pre" | b"listing" | b"plaintext" => (Kind::Pre, false),
        b"script" | b"style" | b"template" | b"svg" | b"math" | b"iframe" | b"object"
        | b"canvas" | b"video" | b"audio" | b"select" | b"button" | b"textarea" | b"head"
        | b"title" | b"dialog" | b"noembed" | b"xmp" | b"datalist" | b"map" | b"applet"
        | b"label" | b"picture" | b"option" | b"optgroup" | b"marquee" | b"output"
        | b"progress" | b"rp" | b"rt" | b"rtc" | b"blink" | b"menuitem" => (Kind::Skip, false),
        b"br" | b"hr" | b"img" | b"input" | b"meta" | b"link" | b"area" | b"base" | b"col"
        | b"embed" | b"param" | b"source" | b"track" | b"wbr" | b"keygen" | b"frame" => {
            (Kind::Inline, true)
        }
        _ => (Kind::Inline, false),
    }
}

/// Elements whose content is raw text up to their end tag.
fn raw_text(name: &[u8]) -> bool {
    matches!(
        name,
        b"script" | b"style" | b"textarea" | b"title" | b"xmp" | b"iframe" | b"noembed"
    )
}

struct Builder<'a> {
    page: Page,
    stack: Vec<u32>,
    /// Open `<a>` elements (text inside counts as link text).
    links: u32,
    /// Per node: whether it is inside (or is) a `<pre>` or `<code>`.
    code: Vec<bool>,
    src: &'a str,
    seen_html: bool,
    head_open: bool,
    /// What each id value (`[0]`) and class value (`[1]`) seen so far marks: pages
    /// repeat the same few hundred values on thousands of elements.
    classes: ClassCache,
}

/// What each id value (`[0]`) and class value (`[1]`) seen on a page marks, hashed by
/// foldhash (SipHash was about 1.7% of the text step's profile).
type ClassCache = [std::collections::HashMap<String, (u16, Group), foldhash::fast::FixedState>; 2];

impl Builder<'_> {
    fn close_top(&mut self) {
        if let Some(id) = self.stack.pop() {
            let ev = self.page.events.len() as u32;
            self.page.events.push(Event::Close(id));
            let node = &mut self.page.nodes[id as usize];
            node.close = ev;
            if node.kind == Kind::Link {
                self.links = self.links.saturating_sub(1);
            }
        }
    }

    /// Whether one of `names` is open (looking at most `END_TAG_SEARCH` levels down).
    fn inside(&self, names: &[u64]) -> bool {
        self.stack
            .iter()
            .rev()
            .take(END_TAG_SEARCH)
            .any(|&id| names.contains(&self.page.nodes[id as usize].name))
    }

    /// Closes elements down to (and including) the nearest `name` when it is open
    /// above any of `stop`.
    fn close_to(&mut self, name: u64, stop: &[u64]) -> bool {
        let depth = self.stack.len();
        for back in 0..depth.min(END_TAG_SEARCH) {
            let id = self.stack[depth - 1 - back];
            let n = self.page.nodes[id as usize].name;
            if n == name {
                for _ in 0..=back {
                    self.close_top();
                }
                return true;
            }
            if stop.contains(&n) {
                return false;
            }
        }
        false
    }

    /// Opens an element; `lower` is its lowercased name.
    fn open(&mut self, lower: &[u8], attrs: &str) {
        let name_hash = h(lower);
        // A second `<html>` or `<body>` (a page pasted into another) opens nothing.
        if (name_hash == BODY && self.page.body.is_some()) || (name_hash == HTML && self.seen_html)
        {
            return;
        }
        self.seen_html |= name_hash == HTML;
        // Anything but head content ends an open `<head>`, as in browsers (a `<body>`
        // after an unclosed `<head>` must not end up inside it).
        if self.head_open
            && !matches!(
                lower,
                b"title"
                    | b"meta"
                    | b"style"
                    | b"script"
                    | b"link"
                    | b"noscript"
                    | b"base"
                    | b"template"
            )
        {
            self.close_to(HEAD, &[]);
            self.head_open = false;
        }
        if name_hash == HEAD {
            self.head_open = true;
        }
        let (kind, void) = kind(lower);
        if void {
            if lower == b"meta" {
                if self.page.og_title.is_none() {
                    self.page.og_title = og_property(attrs, "og:title");
                }
                match og_property(attrs, "og:type") {
                    Some(t) if t.eq_ignore_ascii_case("article") => self.page.og_article = true,
                    Some(t) if t.to_ascii_lowercase().contains("product") => {
                        self.page.product = true;
                    }
                    _ => {}
                }
            }
            if name_hash == BR || name_hash == HR {
                self.page.events.push(Event::Break);
            }
            return;
        }
        // Implied end tags.
        if matches!(kind, Kind::Block | Kind::Item | Kind::Cell | Kind::Pre) {
            self.close_to(P, &[TABLE, BODY, LI, TD, TH]);
        }
        match name_hash {
            LI => {
                self.close_to(LI, &[UL, OL, TABLE, BODY]);
            }
            DT | DD if !self.close_to(DT, &[DL, TABLE, BODY]) => {
                self.close_to(DD, &[DL, TABLE, BODY]);
            }
            TR => {
                self.close_to(TR, &[TABLE, BODY]);
            }
            TD | TH if !self.close_to(TD, &[TR, TABLE, BODY]) => {
                self.close_to(TH, &[TR, TABLE, BODY]);
            }
            OPTION => {
                self.close_to(OPTION, &[BODY]);
            }
            _ => {}
        }
        if self.stack.len() >= MAX_DEPTH {
            if kind != Kind::Inline && kind != Kind::Link {
                self.page.events.push(Event::Break);
            }
            return;
        }
        let parent_id = self.stack.last().copied();
        let in_code = parent_id.is_some_and(|p| self.code[p as usize]);
        let mut marks = Marks::default();
        // Inside code, class names are a highlighter's token kinds (`hljs-comment`,
        // `token tag`), not page parts.
        let class_rules = !matches!(
            lower,
            b"html" | b"body" | b"a" | b"b" | b"i" | b"em" | b"strong" | b"code" | b"small"
        ) && !in_code;
        parse_attrs(attrs, class_rules, &mut marks, &mut self.classes);
        if marks.entry {
            self.page.entries += 1;
        }
        let mut flags = marks.flags;
        let mut group = marks.group;
        if matches!(lower, b"article" | b"main") {
            flags |= CONTENT;
        }
        let tag_group = match lower {
            b"nav" | b"menu" => Group::Navigation,
            b"aside" => Group::Sidebar,
            b"footer" => Group::Footer,
            b"header" => Group::Header,
            b"noscript" => Group::Noscript,
            _ => Group::None,
        };
        // A form (a contact form's labels and notes, a search box) and a figure's
        // caption (credits, alt text for a photo) are widgets: gone unless they hold
        // most of the page (ASP.NET pages live in one form).
        if matches!(lower, b"form" | b"figcaption") && group == Group::None {
            group = Group::Widgets;
        }
        if tag_group != Group::None {
            group = tag_group;
            flags |= SEMANTIC;
        } else if marks.role_group != Group::None {
            group = marks.role_group;
            flags |= SEMANTIC;
        }
        // The header of an article or of the main content (a `<header>`, or a class
        // saying so) holds its title and introduction, not the site's masthead.
        if group == Group::Header && self.inside(&[ARTICLE, MAIN]) {
            group = Group::None;
            flags &= !SEMANTIC;
        }
        let id = self.page.nodes.len() as u32;
        let parent = self.stack.last().copied().unwrap_or(u32::MAX);
        self.page.nodes.push(Node {
            name: name_hash,
            kind,
            flags,
            group,
            parent,
            open: self.page.events.len() as u32,
            close: u32::MAX,
            own_text: 0,
            own_link: 0,
        });
        self.code
            .push(in_code || name_hash == PRE || name_hash == CODE);
        self.page.events.push(Event::Open(id));
        self.stack.push(id);
        if kind == Kind::Link {
            self.links += 1;
        }
        if name_hash == BODY && self.page.body.is_none() {
            self.page.body = Some(id);
        }
    }

    fn close(&mut self, name: &[u8]) {
        let name_hash = h(name);
        // As in browsers, `</body>` and `</html>` close nothing: text after them (or
        // after a page pasted whole into another) still belongs to the body.
        if name_hash == BODY || name_hash == HTML {
            return;
        }
        if name_hash == HEAD {
            self.head_open = false;
        }
        // An end tag never closes the body (a `<form>` opened around it, say).
        if !self.close_to(name_hash, &[BODY]) && name_hash == P {
            self.page.events.push(Event::Break);
        }
    }

    fn text(&mut self, raw: &str) {
        if raw.is_empty() {
            return;
        }
        let mut decoded = if raw.contains('&') {
            htmlize::unescape(raw)
        } else {
            std::borrow::Cow::Borrowed(raw)
        };
        // NUL characters in text are dropped, as an HTML parser does in the body (and
        // a NUL in the text column breaks readers that treat strings as C strings).
        if decoded.contains('\0') {
            decoded = std::borrow::Cow::Owned(decoded.replace('\0', ""));
            if decoded.is_empty() {
                return;
            }
        }
        let start = self.page.text.len() as u32;
        self.page.text.push_str(&decoded);
        let end = self.page.text.len() as u32;
        let solid = decoded.bytes().filter(|b| !b.is_ascii_whitespace()).count() as u32;
        let link = self.links > 0;
        if let Some(&top) = self.stack.last() {
            let node = &mut self.page.nodes[top as usize];
            node.own_text += solid;
            if link {
                node.own_link += solid;
            }
        }
        self.page.events.push(Event::Text { start, end, link });
    }
}

/// What the attributes of a start tag say.
#[derive(Default)]
struct Marks {
    flags: u16,
    group: Group,
    role_group: Group,
    /// The element says it is one post or article: the hAtom class `hentry`, or a
    /// schema.org `itemtype` of `Article`, `NewsArticle` or `BlogPosting`.
    entry: bool,
}

/// Calls `f(name, value)` for each attribute.
/// Whether a `<script>`'s attributes say it holds JSON-LD.
fn is_json_ld(attrs: &str) -> bool {
    let mut json_ld = false;
    for_attrs(attrs, |name, value| {
        json_ld |=
            name.eq_ignore_ascii_case("type") && value.eq_ignore_ascii_case("application/ld+json");
    });
    json_ld
}

/// Whether JSON-LD text declares a `"@type"` of `"Product"` (alone or first in a list).
fn declares_product(json: &str) -> bool {
    json.match_indices("\"@type\"").any(|(i, key)| {
        let rest = json[i + key.len()..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            return false;
        };
        let rest = rest.trim_start();
        let rest = rest.strip_prefix('[').map_or(rest, str::trim_start);
        rest.starts_with("\"Product\"")
    })
}

fn for_attrs<'a>(attrs: &'a str, mut f: impl FnMut(&'a str, &'a str)) {
    let b = attrs.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        let name_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'=' && b[i] != b'/' {
            i += 1;
        }
        let name = &attrs[name_start..i];
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = "";
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let vs = i + 1;
                let ve = memchr::memchr(q, &b[vs..]).map_or(b.len(), |e| vs + e);
                value = &attrs[vs..ve];
                i = (ve + 1).min(b.len());
            } else {
                let vs = i;
                while i < b.len() && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                value = &attrs[vs..i];
            }
        }
        if name.is_empty() {
            i += 1;
            continue;
        }
        f(name, value);
    }
}

/// Looks at the attributes we use; the rest are skipped. `class_rules`: whether class,
/// id and role may mark the element as boilerplate.
fn parse_attrs(attrs: &str, class_rules: bool, marks: &mut Marks, classes: &mut ClassCache) {
    for_attrs(attrs, |name, value| {
        let is_class = name.eq_ignore_ascii_case("class");
        if is_class || name.eq_ignore_ascii_case("id") {
            // Ids are cached apart (an id value reads without the class-only rules).
            let cache = &mut classes[usize::from(is_class)];
            let (flags, group) = match cache.get(value) {
                Some(&known) => known,
                None => {
                    let marks = crate::classes::classify(value, is_class);
                    cache.insert(value.to_string(), marks);
                    marks
                }
            };
            marks.flags |= flags;
            if class_rules && marks.group == Group::None {
                marks.group = group;
            }
            if is_class
                && value
                    .split_ascii_whitespace()
                    .any(|w| w.eq_ignore_ascii_case("hentry"))
            {
                marks.entry = true;
            }
        } else if name.eq_ignore_ascii_case("itemtype") {
            let kind = value.trim().rsplit('/').next().unwrap_or("");
            if ["Article", "NewsArticle", "BlogPosting"]
                .iter()
                .any(|k| kind.eq_ignore_ascii_case(k))
            {
                marks.entry = true;
            }
        } else if name.eq_ignore_ascii_case("role") {
            let (flags, group) = crate::classes::role(value);
            marks.flags |= flags;
            if class_rules {
                marks.role_group = group;
            }
        } else if name.eq_ignore_ascii_case("itemprop") {
            if value.eq_ignore_ascii_case("articleBody") {
                marks.flags |= CONTENT | POST_BODY;
            } else if value.eq_ignore_ascii_case("text") {
                marks.flags |= CONTENT;
            }
        } else if name.eq_ignore_ascii_case("hidden") {
            marks.flags |= HIDDEN;
        } else if name.eq_ignore_ascii_case("aria-hidden") {
            if value.eq_ignore_ascii_case("true") {
                marks.flags |= HIDDEN;
            }
        } else if name.eq_ignore_ascii_case("style") {
            let v: String = value
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_lowercase();
            if v.contains("display:none") || v.contains("visibility:hidden") {
                marks.flags |= HIDDEN;
            }
        }
    });
}

/// The `og:title` of a `<meta>` tag's attributes, if it is one.
/// The content of a `<meta>` naming the Open Graph `property` (as `property` or `name`).
fn og_property(attrs: &str, property: &str) -> Option<String> {
    let mut is_og = false;
    let mut content = None;
    for_attrs(attrs, |name, value| {
        if (name.eq_ignore_ascii_case("property") || name.eq_ignore_ascii_case("name"))
            && value.eq_ignore_ascii_case(property)
        {
            is_og = true;
        } else if name.eq_ignore_ascii_case("content") {
            content = Some(value);
        }
    });
    let content = content.filter(|_| is_og)?;
    // Whitespace folded, as the `<title>`'s (no-break spaces and runs of spaces too).
    let folded = htmlize::unescape(content)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(folded).filter(|t| !t.is_empty())
}

/// Finds `</name` (case-insensitive) at or after `from`.
fn find_end_tag(src: &[u8], from: usize, name: &[u8]) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr::memmem::find(&src[at..], b"</") {
        let s = at + i;
        let n = s + 2;
        if src.len() >= n + name.len() && src[n..n + name.len()].eq_ignore_ascii_case(name) {
            let after = src.get(n + name.len()).copied();
            if after.is_none_or(|c| c.is_ascii_whitespace() || c == b'>' || c == b'/') {
                return Some(s);
            }
        }
        at = s + 2;
    }
    None
}

/// Parses a page. `max_tags` bounds the work (tags + text runs); past it parsing stops
/// and [`Page::over_budget`] is set.
pub fn parse(src: &str, max_tags: usize) -> Page {
    let mut b = Builder {
        page: Page::default(),
        stack: Vec::new(),
        links: 0,
        code: Vec::new(),
        src,
        seen_html: false,
        head_open: false,
        classes: Default::default(),
    };
    let bytes = src.as_bytes();
    let mut at = 0;
    let mut work = 0usize;
    while at < bytes.len() {
        work += 1;
        if work > max_tags {
            b.page.over_budget = true;
            break;
        }
        let Some(lt) = memchr::memchr(b'<', &bytes[at..]).map(|i| at + i) else {
            b.text(&b.src[at..]);
            break;
        };
        if lt > at {
            b.text(&b.src[at..lt]);
        }
        let rest = &bytes[lt..];
        if rest.starts_with(b"<!--") {
            at = memchr::memmem::find(&rest[4..], b"-->").map_or(bytes.len(), |e| lt + 4 + e + 3);
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
            at = memchr::memchr(b'>', rest).map_or(bytes.len(), |e| lt + e + 1);
            continue;
        }
        let (closing, name_start) = if rest.starts_with(b"</") {
            (true, lt + 2)
        } else {
            (false, lt + 1)
        };
        if !bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic) {
            if closing {
                // `</ …>` without a name: a bogus comment.
                at = memchr::memchr(b'>', rest).map_or(bytes.len(), |e| lt + e + 1);
            } else {
                b.text("<");
                at = lt + 1;
            }
            continue;
        }
        let mut name_end = name_start;
        while name_end < bytes.len()
            && !bytes[name_end].is_ascii_whitespace()
            && bytes[name_end] != b'>'
            && bytes[name_end] != b'/'
        {
            name_end += 1;
        }
        // The end of the tag: the first `>` outside quoted attribute values.
        let mut i = name_end;
        while i < bytes.len() && bytes[i] != b'>' {
            if bytes[i] == b'=' {
                let mut v = i + 1;
                while v < bytes.len() && bytes[v].is_ascii_whitespace() {
                    v += 1;
                }
                if let Some(&q @ (b'"' | b'\'')) = bytes.get(v) {
                    match memchr::memchr(q, &bytes[v + 1..]) {
                        Some(e) => {
                            i = v + 1 + e + 1;
                            continue;
                        }
                        // An unclosed quote: browsers recover at the next `>`.
                        None => {
                            i = memchr::memchr(b'>', &bytes[v..]).map_or(bytes.len(), |e| v + e);
                            break;
                        }
                    }
                }
            }
            i += 1;
        }
        let tag_end = i.min(bytes.len());
        at = (tag_end + 1).min(bytes.len());
        let name = &bytes[name_start..name_end];
        if closing {
            // `close` goes by `h`, which lowercases as it hashes.
            b.close(name);
            continue;
        }
        let attrs = &src[name_end.min(tag_end)..tag_end];
        // Lowercased on the stack (a tag name longer than the buffer is spilled).
        let mut on_stack = [0u8; 32];
        let spilled: Vec<u8>;
        let lower: &[u8] = match on_stack.get_mut(..name.len()) {
            Some(buf) => {
                buf.copy_from_slice(name);
                buf.make_ascii_lowercase();
                buf
            }
            None => {
                spilled = name.to_ascii_lowercase();
                &spilled
            }
        };
        // A `/>` on an HTML container means nothing (browsers open it); on anything
        // else (SVG's `<path/>`, `<g/>`, unknown tags) it closes the element at once,
        // as in foreign content, so that hundreds of them do not pile up unclosed.
        let (tag_kind, void) = kind(lower);
        let self_closing = !void
            && attrs.trim_end().ends_with('/')
            && !matches!(
                tag_kind,
                Kind::Block | Kind::Item | Kind::Cell | Kind::Pre | Kind::Link
            );
        b.open(lower, attrs);
        if self_closing && !raw_text(lower) {
            b.close(lower);
            continue;
        }
        if raw_text(lower) {
            // Raw text runs to the end tag; without one, browsers swallow the rest of
            // the page, we close the element here instead.
            let end = find_end_tag(bytes, at, lower);
            if lower == b"script" && !b.page.product && is_json_ld(attrs) {
                b.page.product = declares_product(&src[at..end.unwrap_or(src.len())]);
            }
            if lower == b"title" && b.page.title.is_none() {
                let raw = &src[at..end.unwrap_or(at)];
                let title = htmlize::unescape(raw);
                let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
                b.page.title = Some(title).filter(|t| !t.is_empty());
            }
            if let Some(end) = end {
                at = memchr::memchr(b'>', &bytes[end..]).map_or(bytes.len(), |e| end + e + 1);
            }
            b.close(lower);
        }
    }
    while !b.stack.is_empty() {
        b.close_top();
    }
    b.page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(p: &Page) -> Vec<&str> {
        p.events
            .iter()
            .filter_map(|e| match e {
                Event::Text { start, end, .. } => Some(&p.text[*start as usize..*end as usize]),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn entities_comments_and_raw_text() {
        let p = parse(
            "<p>a &amp; b &eacute;<!-- <p>no --><script>if (a<b) x = '</p>';</script>c</p>",
            1000,
        );
        assert_eq!(texts(&p), vec!["a & b é", "c"]);
    }

    #[test]
    fn implied_end_tags() {
        let p = parse("<ul><li>one<li>two</ul><p>x<p>y", 1000);
        let li: Vec<_> = p.nodes.iter().filter(|n| n.name == LI).collect();
        assert_eq!(li.len(), 2);
        assert!(li.iter().all(|n| n.close != u32::MAX));
        assert_eq!(p.nodes.iter().filter(|n| n.name == P).count(), 2);
        assert_eq!(p.nodes[1].parent, 0);
    }

    #[test]
    fn deep_nesting_is_flattened() {
        let html = "<div>".repeat(100_000) + "deep text" + &"</div>".repeat(100_000);
        let p = parse(&html, 10_000_000);
        assert!(p.nodes.len() <= MAX_DEPTH);
        assert_eq!(texts(&p), vec!["deep text"]);
        assert!(!p.over_budget);
    }

    #[test]
    fn attributes_mark_nodes() {
        let p = parse(
            r#"<div id="site-nav">n</div><div id=main-content>c</div><p aria-hidden="true">h</p><div style="display: none">x</div><span class='ad'>a</span>"#,
            1000,
        );
        assert_eq!(p.nodes[0].group, Group::Navigation);
        assert_eq!(p.nodes[1].flags & CONTENT, CONTENT);
        assert_eq!(p.nodes[2].flags & HIDDEN, HIDDEN);
        assert_eq!(p.nodes[3].flags & HIDDEN, HIDDEN);
        assert_eq!(p.nodes[4].group, Group::Ads);
    }

    #[test]
    fn budget() {
        let p = parse(&"<b>x</b>".repeat(100), 50);
        assert!(p.over_budget);
    }
}
