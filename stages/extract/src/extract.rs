//! Main text from a parsed page: boilerplate subtrees removed, the extraction root
//! chosen, blocks rendered as lines, link-heavy lines dropped.
//!
//! The rules, in order:
//! 1. Removed with their content: scripts, styles, form controls, embeds; hidden
//!    elements (`hidden`, `aria-hidden`, `display:none`, hide classes) unless they hold
//!    prose (a collapsed FAQ answer or a closed tab is content a reader opens; a hidden
//!    menu is not; a hidden `<pre>` is a raw copy of the page and goes) or most of
//!    the page's text; elements whose tag (`nav`, `header`, `footer`, `aside`), ARIA
//!    role or class/id words (see [`crate::classes`]) name a
//!    boilerplate group (a `<form>` and a `<figcaption>` are in the widgets group);
//!    per-post chrome of threads (user cards, signatures, votes).
//! 2. Guards: shares are measured in the text outside links that the next more lenient
//!    pass keeps, so menus do not dilute them. A class-marked element holding more than
//!    `wrapper_share` of that text is a wrapper and stays; so does a class group whose
//!    elements together hold that much (the posts of a thread are `comment`s, a
//!    script-rendered page lives in `<noscript>`), except dialogs and consent banners;
//!    so do the elements of a wrapper's group at its depth, under a common block below
//!    the body, when no element of its group lies inside it (page-builder panels that
//!    are all `widget`s, the largest a wrapper).
//!    A class-marked sidebar beside a content-marked element with 300 bytes of prose
//!    (neither inside nor around it) is not a wrapper, whatever its size (a reviews
//!    widget beside a shop's description). A metadata-class element (`entry-meta`)
//!    around such a content-marked element is not removed for its class.
//!    A `nav`/`header`/`footer`/`aside` is weighed by its prose instead (blocks of 40
//!    bytes or more outside links): it stays only when it holds `semantic_share` of
//!    the page's prose, so an article wrapped in `<header>` stays and a mega menu goes.
//!    The comments guard does not hold beside an article of the page's own (a blog
//!    post's comment section; a short one when the page declares `og:type` `article`),
//!    unless the address names a discussion; class-marked
//!    headers and footers that come five times or more are parts of
//!    cards and stay.
//! 3. Root (weighed by text outside links plus a quarter of link text, so that a
//!    listing of linked items has weight where its items are): the largest
//!    content-marked element (`article`, `main`, `itemprop=articleBody`,
//!    content classes) holding at least `container_share` of the text or
//!    `container_prose_share` of the prose (less with `favor = "precision"`), or its parent
//!    when it is one of a run of such siblings (posts), or else a content-marked block
//!    inside it holding `DESCEND_SHARE` of it with no other content-marked block of
//!    some size beside it (an `entry-content` inside an `<article>` that also holds a
//!    carousel of other posts); the body when there is none; then down into any child
//!    holding `dominant_share` of the text (unnamed headers, promo strips and footers
//!    beside the content fall away).
//! 4. Rendering: block elements start lines, `<br>` breaks lines, list items get "- ",
//!    table cells of a row are joined with " | ", `<pre>` keeps its whitespace.
//! 5. A line under 30 bytes whose text is mostly link text (a menu item, a tag) is
//!    dropped; headings and longer link lines are titles (of a listing, a product
//!    grid) and stay. On a link index (tables of contents, indexes of terms) every
//!    link line stays. A line of 30 bytes or more already written is not written
//!    again (outside `<pre>` and tables).
//! 6. Fallback: while the text is under 250 bytes, the page is extracted again without
//!    the class/id rules, then without the tag rules, and a pass that gives over twice
//!    the text wins (with `favor = "precision"`, sixteen times when the short text is
//!    a content-marked element's); when even that is empty, the
//!    densest block of text outside links is taken. A page is empty only when it has
//!    no text outside links at all.

use crate::html::{CHROME, CONTENT, Event, GROUPS, Group, HIDDEN, Kind, POST_BODY, Page, SEMANTIC};

/// What a doubtful part of a page goes to (`[config.extract] favor`), as trafilatura's
/// `favor_precision` and `favor_recall`.
/// - `precision` (the default, as FineWeb runs trafilatura): readers' comments
///   (comment-marked elements that hold no content-marked element with an article's
///   prose) are removed whatever their size, in every pass, when a content-marked
///   element outside them has prose of its own (a post, however short) and the address
///   does not name a discussion; a page of comments with nothing beside them is a
///   thread and keeps them, and so are comments that are `<article>`s of their own. On
///   a page that declares itself a product (JSON-LD or `og:type`) they are reviews,
///   treated as in `balanced`. A content-marked element is trusted as the root with
///   less of the page around it, and its text is replaced by a more lenient pass only
///   when that pass gives sixteen times as much. On a page that declares itself an
///   article, titles of other pages after the last paragraph (related stories) go.
///   Comments also go on a page with one post (`hentry`), however little the post
///   holds; on a page with an article, a comment section's heading ends the text and a
///   heading of related links goes with the lines under it. A content block of an
///   article's size is the root from 40% of a wider one that is no post's body; a
///   promotion or related-links element inside a post's body goes whatever its size;
///   a landmark that holds an article is not weighed by its prose.
/// - `balanced`: they are removed beside an article of the page's own (a blog post and
///   its comment section: 1,000 bytes of prose that outweigh them), whatever their
///   size and in every pass, and kept when they are most of the page (a thread).
/// - `recall`: they are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Favor {
    #[default]
    Precision,
    Balanced,
    Recall,
}

/// Extraction settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Precision or recall (see [`Favor`]).
    pub favor: Favor,
    /// A boilerplate-marked element holding more than this share of the body's text is
    /// kept (it is a wrapper, not a sidebar).
    pub wrapper_share: f64,
    /// A `nav`/`header`/`footer`/`aside` (or ARIA landmark) holding more than this
    /// share of the page's prose wraps the content and stays (menus are not prose).
    pub semantic_share: f64,
    /// A content container is chosen when it holds at least this share of the body's
    /// text (outside links, plus a quarter of link text).
    pub container_share: f64,
    /// Lines (shorter than 30 non-space bytes, not headings) whose link text exceeds
    /// this share of their text are dropped.
    pub max_link_density: f64,
    /// When the text of the lines dropped for their links is more than this many times
    /// the text kept, the page is a link index (a table of contents, an index of
    /// terms): it is rendered again with its link lines, as trafilatura keeps them
    /// (when those lines hold at least 200 non-space bytes).
    pub link_index_ratio: f64,
    /// A content container is also chosen when it holds at least this share of the
    /// body's prose (a short post beside a sidebar of linked teasers and hidden
    /// panels).
    pub container_prose_share: f64,
    /// The extraction root goes down into a child holding at least this share of its
    /// clean text.
    pub dominant_share: f64,
}

/// With `favor = "precision"`, the container shares are at most these: a content-marked
/// element is trusted as the article with less of the page around it.
const PRECISION_CONTAINER_SHARE: f64 = 0.2;
const PRECISION_CONTAINER_PROSE_SHARE: f64 = 0.3;

/// …and these when the element is or holds a post's body named by its class
/// ([`POST_BODY`]: `entry-body`, `post-content`), on a page that is no discussion and no
/// site's front page: a short post beside a column of blurbs. Dragnet train precision
/// 0.919 -> 0.923 (2026-12-05); at 5% / 10%, WCXB articles lose.
const POST_BODY_CONTAINER_SHARE: f64 = 0.1;
const POST_BODY_CONTAINER_PROSE_SHARE: f64 = 0.15;

impl Default for Options {
    fn default() -> Self {
        Options {
            favor: Favor::default(),
            wrapper_share: 0.5,
            semantic_share: 0.85,
            container_share: 0.4,
            container_prose_share: 0.5,
            max_link_density: 0.5,
            link_index_ratio: 4.0,
            dominant_share: 0.9,
        }
    }
}

/// Below this many bytes the result of a pass is compared with the next, more
/// lenient pass (trafilatura's MIN_EXTRACTED_SIZE is the same 250).
const RECOVER_BELOW: usize = 250;

/// A more lenient pass replaces a short result when it gives more than this many
/// times its text…
const RECOVER_FACTOR: usize = 2;

/// …and, with `favor = "precision"`, this many times when the short result is a
/// content-marked element's (a short post: what the lenient passes add around it is
/// the sidebar and footer its class rules removed). Dragnet train precision 0.904 ->
/// 0.915 at any value from 10 to 32 (2026-12-05).
const TRUSTED_RECOVER_FACTOR: usize = 16;

/// How much of the page's rules a pass applies. Each level drops one family of rules,
/// so that a rule that is wrong for a page (a class name that reads as boilerplate on
/// the element holding everything, a page built of `<header>`s) cannot empty it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    /// Class, id, role and tag rules.
    All,
    /// Tag and role rules only (`nav`, `footer`, `aside`, `role=navigation`, …).
    Structural,
    /// Only what is never text: scripts, styles, hidden elements.
    Bare,
}

/// The main text of a page ("" only when the page has no text at all). The passes run
/// from the strictest down while the text is short; a more lenient pass wins when it
/// gives over twice as much text, and when every pass is empty, the densest block of
/// text is taken.
pub fn main_text(page: &Page, opts: &Options) -> String {
    let mut best = String::new();
    let mut factor = RECOVER_FACTOR;
    for level in [Level::All, Level::Structural, Level::Bare] {
        let (text, in_container) = extract_pass(page, opts, level);
        if best.is_empty() || text.len() > factor * best.len() {
            best = text;
            if in_container && opts.favor == Favor::Precision {
                factor = TRUSTED_RECOVER_FACTOR;
            }
        }
        if best.len() >= RECOVER_BELOW {
            return best;
        }
    }
    if best.trim().is_empty() {
        return densest_block(page, opts);
    }
    best
}

/// The page's title: its `og:title`, else its `<title>`, else the text of its first
/// `<h1>` (whitespace folded; `None` when all are empty).
pub fn title(page: &Page) -> Option<String> {
    if let Some(t) = page.og_title.as_ref().or(page.title.as_ref()) {
        return Some(t.clone());
    }
    let h1 = page.nodes.iter().position(|n| n.name == crate::html::H1)?;
    let node = &page.nodes[h1];
    let mut words = Vec::new();
    for e in &page.events[node.open as usize..(node.close as usize).min(page.events.len())] {
        if let Event::Text { start, end, .. } = e {
            words.extend(page.text[*start as usize..*end as usize].split_whitespace());
        }
    }
    Some(words.join(" ")).filter(|t| !t.is_empty())
}

/// Raw text per subtree (children have larger ids than their parents), scripts and
/// other never-text elements left out.
fn subtree_text(page: &Page) -> Vec<u64> {
    let n = page.nodes.len();
    let mut raw = vec![0u64; n];
    for id in (0..n).rev() {
        let node = &page.nodes[id];
        if node.kind == Kind::Skip {
            raw[id] = 0;
            continue;
        }
        raw[id] += u64::from(node.own_text);
        if let Some(p) = parent(node.parent) {
            raw[p] += raw[id];
        }
    }
    raw
}

/// Text of the body (or of the top-level nodes when there is no body).
fn root_total(page: &Page, per_node: &[u64]) -> u64 {
    match page.body {
        Some(b) => per_node[b as usize],
        None => (0..page.nodes.len())
            .filter(|&i| parent(page.nodes[i].parent).is_none())
            .map(|i| per_node[i])
            .sum(),
    }
}

/// Text per subtree and what a pass removes.
struct Analysis {
    removed: Vec<bool>,
    /// Text outside links and removed elements, per subtree.
    clean: Vec<u64>,
    /// The page holds an article beside its comments, and the comments go (with
    /// `precision`: any content-marked element with prose, on a page that is no
    /// thread). Rendering then also ends the text at a comment section's heading and
    /// drops sections of related links.
    comments_go: bool,
}

/// Decides what a pass removes. The share of an element (and of a boilerplate group)
/// is measured in the text that the next more lenient pass keeps outside links, so
/// that menus do not dilute the share of the element holding the article: a class
/// rule never removes an element holding most of the page's prose.
fn analyze(page: &Page, opts: &Options, level: Level) -> Analysis {
    let skip: Vec<bool> = page.nodes.iter().map(|n| n.kind == Kind::Skip).collect();
    let weights = |removed: &[bool], clean: &[u64]| Weights {
        clean: clean.to_vec(),
        prose: prose(page, removed),
    };
    let bare = removal(
        page,
        opts,
        Level::Bare,
        &weights(&skip, &subtree_text(page)),
    );
    if level == Level::Bare {
        return bare;
    }
    let w = weights(&bare.removed, &bare.clean);
    let structural = removal(page, opts, Level::Structural, &w);
    if level == Level::Structural {
        return structural;
    }
    let w = weights(&structural.removed, &structural.clean);
    removal(page, opts, Level::All, &w)
}

/// What the guards of a pass weigh elements by, from the next more lenient pass: text
/// outside links, and prose.
struct Weights {
    clean: Vec<u64>,
    prose: Vec<u64>,
}

/// A block of fewer non-space bytes outside links than this is not prose (menu items,
/// labels, prices), and does not count toward an element's share of the page.
const PROSE_MIN: u32 = 40;

/// Prose per subtree: the text outside links of each block (its inline descendants
/// included) that is at least [`PROSE_MIN`] long, over what `removed` leaves.
fn prose(page: &Page, removed: &[bool]) -> Vec<u64> {
    let n = page.nodes.len();
    let mut block_of = vec![0usize; n];
    let mut block_text = vec![0u32; n];
    for id in 0..n {
        let node = &page.nodes[id];
        block_of[id] = match (node.kind, parent(node.parent)) {
            (Kind::Inline | Kind::Link | Kind::Skip, Some(p)) => block_of[p],
            _ => id,
        };
        if !removed[id] {
            let own = node.own_text - node.own_link.min(node.own_text);
            block_text[block_of[id]] = block_text[block_of[id]].saturating_add(own);
        }
    }
    let mut out = vec![0u64; n];
    for id in (0..n).rev() {
        if removed[id] {
            continue;
        }
        if block_of[id] == id && block_text[id] >= PROSE_MIN {
            out[id] += u64::from(block_text[id]);
        }
        if let Some(p) = parent(page.nodes[id].parent) {
            out[p] += out[id];
        }
    }
    out
}

/// From this many separate class-marked headers (or footers) on, a page's headers are
/// the parts of repeated components, not its masthead.
const COMPONENT_PARTS: u32 = 5;

/// Per group: whether its class-marked headers or footers are parts of components (a
/// card's header holding a product's title and a link to it, `item-card__header`),
/// because the page has [`COMPONENT_PARTS`] or more of them, none inside another. A
/// site's masthead and footer come once or twice.
fn component_parts(page: &Page) -> [bool; GROUPS] {
    let mut count = [0u32; GROUPS];
    let mut inside = vec![false; page.nodes.len()];
    for (id, node) in page.nodes.iter().enumerate() {
        let above = parent(node.parent).is_some_and(|p| inside[p]);
        let part =
            matches!(node.group, Group::Header | Group::Footer) && node.flags & SEMANTIC == 0;
        if part && !above {
            count[node.group as usize] += 1;
        }
        inside[id] = above || part;
    }
    count.map(|c| c >= COMPONENT_PARTS)
}

/// Prose (bytes in blocks of 40+ outside links) of a content-marked element that makes
/// the comments around it reader comments, not the posts of a thread.
const ARTICLE_PROSE: u64 = 1000;

/// The same on a page that says it is an article (`og:type` `article`): a short post
/// with a long comment section.
const DECLARED_ARTICLE_PROSE: u64 = 300;

/// From this many `<article>` elements inside comments on, the comments are the posts
/// of a thread.
const THREAD_POSTS: usize = 2;

/// Words of an address (host labels, path segments, split at every character that
/// is not a letter or a digit) that name a discussion: forum software and Q&A sites
/// put them there (`/forum/…`, `/threads/…`, Discourse's `/t/…`, `viewtopic.php`,
/// `/questions/…`, Reddit's `/comments/…`).
const DISCUSSION_WORDS: &[&str] = &[
    "forum",
    "forums",
    "thread",
    "threads",
    "topic",
    "topics",
    "viewtopic",
    "showthread",
    "discussion",
    "discussions",
    "discuss",
    "community",
    "communities",
    "board",
    "boards",
    "t",
    "questions",
    "answers",
    "comments",
];

/// Whether a page's address names a discussion (a word such as `forum`, `thread`,
/// `topic`, `t` or `questions` among its host labels and path segments); the query
/// and fragment are not read.
pub fn discussion_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    rest.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| DISCUSSION_WORDS.iter().any(|d| w.eq_ignore_ascii_case(d)))
}

/// Whether a page's address is a site's front page: nothing after the host but `/`, a
/// query or a fragment (`https://shop.example/?ref=ad`). An empty address is not.
pub fn front_page_url(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    rest.split_once('/').is_none_or(|(_, path)| path.is_empty())
}

/// Whether the page holds an article of its own beside its comments: a content-marked
/// element outside every comments-marked one, with [`ARTICLE_PROSE`] of prose of its
/// own (not counting comments inside it) and more of its own than of comments inside
/// it (a blog post followed by its comment section, a story with a comment counter in
/// its header), on a page whose address does not name a discussion. Then the comments
/// are comments however long they run; otherwise comments that hold most of the page
/// are the posts of a thread and stay.
///
/// With `precision`, any content-marked element with prose of its own is such an
/// article, however short, and however long the comments after it run; and on a page
/// with one post (`Page::entries`) the comments go whatever the post holds.
fn comments_beside_article(page: &Page, weights: &Weights, precision: bool) -> bool {
    if page.discussion {
        return false;
    }
    let n = page.nodes.len();
    let mut in_comments = vec![false; n];
    for (id, node) in page.nodes.iter().enumerate() {
        in_comments[id] =
            node.group == Group::Comments || parent(node.parent).is_some_and(|p| in_comments[p]);
    }
    // Prose of the outermost comments-marked elements inside each element.
    let mut comment_prose = vec![0u64; n];
    for id in (0..n).rev() {
        let node = &page.nodes[id];
        let up = parent(node.parent);
        if node.group == Group::Comments && !up.is_some_and(|p| in_comments[p]) {
            comment_prose[id] = weights.prose[id];
        }
        if let Some(p) = up {
            comment_prose[p] += comment_prose[id];
        }
    }
    // Comments that are `<article>`s of their own are the posts of a thread (a link
    // aggregator's discussion under a short post): `precision` weighs them as
    // `balanced` does.
    let precision = precision
        && (0..n)
            .filter(|&id| in_comments[id] && page.nodes[id].name == crate::html::ARTICLE)
            .take(THREAD_POSTS)
            .count()
            < THREAD_POSTS;
    // A page with one element that says it is a post (hAtom's `hentry`, a schema.org
    // `BlogPosting`) is a post, and its comments are comments however little prose the
    // post holds (a photo or a video and its title).
    if precision && page.entries == 1 {
        return true;
    }
    let least = if precision {
        1
    } else if page.og_article {
        DECLARED_ARTICLE_PROSE
    } else {
        ARTICLE_PROSE
    };
    (0..n).any(|id| {
        let own = weights.prose[id].saturating_sub(comment_prose[id]);
        page.nodes[id].flags & CONTENT != 0
            && !in_comments[id]
            && own >= least
            && (precision || comment_prose[id] < own)
    })
}

fn removal(page: &Page, opts: &Options, level: Level, weights: &Weights) -> Analysis {
    let n = page.nodes.len();
    let weight = &weights.clean;
    let total = root_total(page, weight).max(1);
    let prose_limit = opts.semantic_share * root_total(page, &weights.prose).max(1) as f64;
    let limit = opts.wrapper_share * total as f64;
    // Text of each boilerplate group: its outermost elements that are not wrappers.
    let mut group_text = [0u64; GROUPS];
    let mut in_group = vec![0u16; n];
    for id in 0..n {
        let node = &page.nodes[id];
        let inherited = parent(node.parent).map_or(0, |p| in_group[p]);
        let bit = 1u16 << (node.group as u8);
        let counted = node.group != Group::None && weight[id] as f64 <= limit;
        if counted && inherited & bit == 0 {
            group_text[node.group as usize] += weight[id];
        }
        in_group[id] = inherited | if counted { bit } else { 0 };
    }
    // A class-marked wrapper with no element of its group inside is one of the group's
    // blocks, only the largest (a page built of `widget` panels); elements of its
    // group at its depth under a common block below the body are its parallels and
    // stay with it.
    let mut below = vec![0u16; n];
    for id in (0..n).rev() {
        if let Some(p) = parent(page.nodes[id].parent) {
            below[p] |= below[id] | (1u16 << (page.nodes[id].group as u8));
        }
    }
    let mut depth = vec![0u32; n];
    for id in 0..n {
        depth[id] = parent(page.nodes[id].parent).map_or(0, |p| depth[p] + 1);
    }
    let body_depth = page.body.map_or(0, |b| depth[b as usize]);
    let wrappers: Vec<usize> = (0..n)
        .filter(|&id| {
            let node = &page.nodes[id];
            node.group != Group::None
                && node.flags & SEMANTIC == 0
                && weight[id] as f64 > limit
                && below[id] & (1u16 << (node.group as u8)) == 0
        })
        .collect();
    let parallel = |id: usize| {
        wrappers.iter().any(|&w| {
            if w == id || page.nodes[w].group != page.nodes[id].group || depth[w] != depth[id] {
                return false;
            }
            let (mut a, mut b) = (id, w);
            while a != b {
                match (parent(page.nodes[a].parent), parent(page.nodes[b].parent)) {
                    (Some(pa), Some(pb)) => (a, b) = (pa, pb),
                    _ => return false,
                }
            }
            depth[a] > body_depth
        })
    };
    let comments_beside_article = match opts.favor {
        // A product's comments are its reviews: as `balanced` treats them.
        Favor::Precision => comments_beside_article(page, weights, !page.product),
        Favor::Balanced => comments_beside_article(page, weights, false),
        Favor::Recall => false,
    };
    let component_parts = component_parts(page);
    // Content-marked elements with an article's prose, counted below and above each
    // element: a sidebar with such an element neither inside nor around it is beside
    // the content, however much text it holds (a reviews widget on a shop page).
    let article = |id: usize| {
        page.nodes[id].flags & CONTENT != 0 && weights.prose[id] >= DECLARED_ARTICLE_PROSE
    };
    let mut articles_below = vec![0u32; n];
    for id in (0..n).rev() {
        articles_below[id] += u32::from(article(id));
        if let Some(p) = parent(page.nodes[id].parent) {
            articles_below[p] += articles_below[id];
        }
    }
    let mut articles_above = vec![0u32; n];
    for id in 0..n {
        articles_above[id] =
            parent(page.nodes[id].parent).map_or(0, |p| articles_above[p] + u32::from(article(p)));
    }
    let articles = (0..n).filter(|&id| article(id)).count() as u32;
    let beside_article = |id: usize| articles > articles_below[id] + articles_above[id];
    // Whether an element holds an article: a content-marked element with an article's
    // prose and no class of a boilerplate group below it. A metadata-class element
    // around one (`entry-meta` around `entry-body`) is not removed for its class.
    let mut holds_article = vec![false; n];
    for id in (0..n).rev() {
        let node = &page.nodes[id];
        if let Some(p) = parent(node.parent) {
            holds_article[p] |= holds_article[id] || node.group == Group::None && article(id);
        }
    }
    // A comments-marked element beside an article goes whatever its size (and, in
    // `precision`, in every pass), unless it holds an article itself (the article
    // inside a `comment`-named wrapper; not a comment's own `comment-content`).
    let any_size = |id: usize| {
        comments_beside_article && page.nodes[id].group == Group::Comments && !holds_article[id]
    };
    // With `precision`, an element marked as a promotion or as related links inside a
    // post's body (by its class) that holds `ARTICLE_PROSE` of prose besides goes
    // however much prose it holds: a slideshow of other stories' captions appended to
    // a story. Not on a site's front page. The prose of the nearest such body around
    // each element:
    let mut article_around = vec![0u64; n];
    for id in 0..n {
        article_around[id] = parent(page.nodes[id].parent).map_or(0, |p| {
            if article(p) && page.nodes[p].flags & POST_BODY != 0 {
                weights.prose[p]
            } else {
                article_around[p]
            }
        });
    }
    let promo_in_article = |id: usize| {
        let node = &page.nodes[id];
        opts.favor == Favor::Precision
            && !page.front_page
            && matches!(node.group, Group::Ads | Group::Related)
            && node.flags & SEMANTIC == 0
            && article_around[id] >= weights.prose[id] + ARTICLE_PROSE
    };
    let mut removed = vec![false; n];
    for id in 0..n {
        let node = &page.nodes[id];
        let inherited = parent(node.parent).is_some_and(|p| removed[p]);
        let small = weight[id] as f64 <= limit
            || node.group == Group::Sidebar && node.flags & SEMANTIC == 0 && beside_article(id);
        let group_rule = match level {
            Level::All => node.group != Group::None,
            Level::Structural => {
                node.group != Group::None && node.flags & SEMANTIC != 0 || any_size(id)
            }
            Level::Bare => any_size(id),
        } && (node.group == Group::Consent
            || (node.flags & SEMANTIC != 0 && node.group != Group::Noscript)
            || group_text[node.group as usize] as f64 <= limit
            || node.group == Group::Comments && comments_beside_article
            || promo_in_article(id))
            && !(node.flags & SEMANTIC == 0 && component_parts[node.group as usize])
            && !(opts.favor == Favor::Recall && node.group == Group::Comments);
        removed[id] = inherited
            || node.kind == Kind::Skip
            || node.flags & HIDDEN != 0
                && (small && weights.prose[id] == 0 || node.kind == Kind::Pre)
            || group_rule
                && if node.flags & SEMANTIC != 0 && node.group != Group::Noscript {
                    // With `precision`, a landmark that holds an article is not weighed
                    // by its prose (a theme that puts each post in an `<aside>`).
                    !(opts.favor == Favor::Precision && holds_article[id])
                        && weights.prose[id] as f64 <= prose_limit
                        // With `precision`, an `<aside>` beside an article is a sidebar
                        // however much prose its teasers hold, as a class-marked one is.
                        || opts.favor == Favor::Precision
                            && node.group == Group::Sidebar
                            && beside_article(id)
                } else {
                    (any_size(id) || promo_in_article(id) || small && !parallel(id))
                        && !(node.group == Group::Meta && holds_article[id])
                }
            || level == Level::All && node.flags & CHROME != 0 && small;
    }
    let clean = clean_text(page, &removed);
    Analysis {
        removed,
        clean,
        comments_go: comments_beside_article,
    }
}

/// The root goes into a content-marked descendant of the chosen container holding
/// at least this share of it.
const DESCEND_SHARE: f64 = 0.6;

/// With `favor = "precision"`, the share for a content block of `ARTICLE_PROSE` bytes
/// or more inside one that is no post's body.
const ARTICLE_DESCEND_SHARE: f64 = 0.4;

/// Link text counts this much (in quarters of text outside links) toward where the
/// root goes.
const LINK_WEIGHT_QUARTERS: u64 = 1;

/// `clean` plus a share of the link text outside removed elements, per subtree.
fn kept_text(page: &Page, removed: &[bool], clean: &[u64]) -> Vec<u64> {
    let link = subtree_sum(page, removed, |n| n.own_link.min(n.own_text));
    (0..page.nodes.len())
        .map(|i| 4 * clean[i] + LINK_WEIGHT_QUARTERS * link[i])
        .collect()
}

/// Text outside links and removed elements, per subtree.
fn clean_text(page: &Page, removed: &[bool]) -> Vec<u64> {
    subtree_sum(page, removed, |n| n.own_text - n.own_link.min(n.own_text))
}

/// Sums `own` over each subtree, leaving out removed elements (children have larger
/// ids than their parents).
fn subtree_sum(page: &Page, removed: &[bool], own: impl Fn(&crate::html::Node) -> u32) -> Vec<u64> {
    let n = page.nodes.len();
    let mut sum = vec![0u64; n];
    for id in (0..n).rev() {
        if removed[id] {
            continue;
        }
        let node = &page.nodes[id];
        sum[id] += u64::from(own(node));
        if let Some(p) = parent(node.parent) {
            sum[p] += sum[id];
        }
    }
    sum
}

/// The text of one pass, and whether its root is a content-marked element.
fn extract_pass(page: &Page, opts: &Options, level: Level) -> (String, bool) {
    let n = page.nodes.len();
    if n == 0 {
        return (render(page, 0, page.events.len(), &[], opts, false), false);
    }
    let mut in_container = false;
    let Analysis {
        removed,
        clean,
        comments_go,
    } = analyze(page, opts, level);
    // Text the root is chosen by: outside links, plus a share of link text, so that a
    // listing whose items are links still has weight where its items are.
    let weight = kept_text(page, &removed, &clean);
    let root_weight = root_total(page, &weight);
    let mut root = page.body.map(|b| b as usize);
    let content = |i: usize| page.nodes[i].flags & CONTENT != 0 && !removed[i];
    let best = (0..n)
        .filter(|&i| content(i))
        .max_by_key(|&i| (weight[i], std::cmp::Reverse(i)));
    // On a discussion's address the comments are the content: the first post is not
    // trusted as the article with less of the page around it.
    let (container_share, prose_share) = match opts.favor {
        Favor::Precision if !page.discussion => (
            opts.container_share.min(PRECISION_CONTAINER_SHARE),
            opts.container_prose_share
                .min(PRECISION_CONTAINER_PROSE_SHARE),
        ),
        _ => (opts.container_share, opts.container_prose_share),
    };
    let container = |best: usize| {
        // A post's body (by its class, not a tag) in or as the element, on a page that
        // is no discussion and no site's front page, is trusted with less around it.
        let post = opts.favor == Favor::Precision
            && !page.discussion
            && !page.front_page
            && (best..n)
                .take_while(|&i| page.nodes[i].open < page.nodes[best].close)
                .any(|i| page.nodes[i].flags & POST_BODY != 0 && !removed[i]);
        let (cs, ps) = if post {
            (
                container_share.min(POST_BODY_CONTAINER_SHARE),
                prose_share.min(POST_BODY_CONTAINER_PROSE_SHARE),
            )
        } else {
            (container_share, prose_share)
        };
        weight[best] as f64 >= cs * root_weight.max(1) as f64 || {
            let prose = prose(page, &removed);
            prose[best] as f64 >= ps * root_total(page, &prose).max(1) as f64
        }
    };
    // With `precision`, a content block of an article's size (300 bytes of prose on a
    // page that says it is an article) inside a wider one that
    // is no post's body (a page's `role="main"` or `#content` that also holds the
    // lists of other stories, a blog's sidebar) is the content with less of the wider
    // block. Not inside a post's body: its parts (`entry-body`, then `entry-more`) are
    // one article.
    let descend_share = |inner: usize, best: usize| {
        let article_in_wider = opts.favor == Favor::Precision
            && !page.discussion
            && !page.front_page
            && !page.product
            && page.nodes[best].flags & POST_BODY == 0
            && clean[inner]
                >= if page.og_article {
                    DECLARED_ARTICLE_PROSE
                } else {
                    ARTICLE_PROSE
                };
        if article_in_wider {
            ARTICLE_DESCEND_SHARE
        } else {
            DESCEND_SHARE
        }
    };
    if level == Level::All
        && let Some(mut best) = best
        && container(best)
    {
        // One of a run of content blocks (the posts of a thread, the sections of a
        // long article): their parent holds them all.
        let up = page.nodes[best].parent;
        if let Some(p) = parent(up)
            && (0..n).any(|i| {
                i != best
                    && page.nodes[i].parent == up
                    && content(i)
                    && weight[i] * 4 >= weight[best]
            })
        {
            best = p;
        } else {
            // A content block inside the chosen one that holds most of it (the
            // `entry-content` of an `<article>` that also holds a carousel of other
            // posts) is the content, unless other content blocks lie beside it (the
            // posts of a thread, each in its own wrapper).
            while let Some(inner) = (best + 1..n)
                .take_while(|&i| page.nodes[i].open < page.nodes[best].close)
                .filter(|&i| content(i))
                .max_by_key(|&i| (weight[i], std::cmp::Reverse(i)))
                && weight[inner] as f64 >= descend_share(inner, best) * weight[best] as f64
                && !(best + 1..n)
                    .take_while(|&i| page.nodes[i].open < page.nodes[best].close)
                    .any(|i| {
                        content(i)
                            && weight[i] * 10 >= weight[inner]
                            && !within(page, i, inner)
                            && !within(page, inner, i)
                    })
            {
                best = inner;
            }
        }
        root = Some(best);
        in_container = true;
    }
    let range = match root {
        Some(mut at) => {
            if level == Level::All {
                at = dominant_descendant(page, &weight, at, opts.dominant_share);
            }
            let node = &page.nodes[at];
            (node.open as usize, node.close as usize + 1)
        }
        None => (0, page.events.len()),
    };
    let text = render(
        page,
        range.0,
        range.1.min(page.events.len()),
        &removed,
        opts,
        comments_go,
    );
    (text, in_container)
}

/// Goes down from `at` into the child holding at least `share` of its text, as long as
/// there is one: what sits beside that child (a site header, a promo strip, a footer
/// that no rule named) is dropped.
fn dominant_descendant(page: &Page, clean: &[u64], mut at: usize, share: f64) -> usize {
    let n = page.nodes.len();
    let mut best_child = vec![usize::MAX; n];
    for id in 0..n {
        if let Some(p) = parent(page.nodes[id].parent)
            && (best_child[p] == usize::MAX || clean[id] > clean[best_child[p]])
        {
            best_child[p] = id;
        }
    }
    while let Some(&c) = best_child.get(at)
        && c != usize::MAX
        && clean[c] > 0
        && clean[c] as f64 >= share * clean[at] as f64
    {
        at = c;
    }
    at
}

/// The last resort: the block with the most text of its own outside links, and its
/// subtree, rendered without the link rule. A page whose only text is links (a bare
/// menu) has no main text: "".
fn densest_block(page: &Page, opts: &Options) -> String {
    let skip: Vec<bool> = page.nodes.iter().map(|n| n.kind == Kind::Skip).collect();
    let own = |i: usize| {
        let n = &page.nodes[i];
        n.own_text - n.own_link.min(n.own_text)
    };
    let Some(best) = (0..page.nodes.len())
        .filter(|&i| !skip[i] && own(i) > 0)
        .max_by_key(|&i| (own(i), std::cmp::Reverse(i)))
    else {
        return String::new();
    };
    // Climb to the nearest block, so that a paragraph's inline run comes whole.
    let mut at = best;
    while !matches!(
        page.nodes[at].kind,
        Kind::Block | Kind::Item | Kind::Cell | Kind::Pre
    ) && let Some(p) = parent(page.nodes[at].parent)
    {
        at = p;
    }
    let node = &page.nodes[at];
    render_lines(
        page,
        node.open as usize,
        (node.close as usize + 1).min(page.events.len()),
        &skip,
        opts,
        true,
    )
    .0
}

/// A listing of the elements holding at least `min_share` of the page's text: depth,
/// tag hash, kind, group, flags and text (raw / outside links). For looking into a
/// page that extracts badly (`examples/explain.rs`).
pub fn explain(page: &Page, min_share: f64) -> String {
    use std::fmt::Write;
    let raw = subtree_text(page);
    let total = root_total(page, &raw).max(1);
    let analysis = analyze(page, &Options::default(), Level::All);
    let mut depth = vec![0usize; page.nodes.len()];
    let mut out = String::new();
    for (id, node) in page.nodes.iter().enumerate() {
        depth[id] = parent(node.parent).map_or(0, |p| depth[p] + 1);
        if (raw[id] as f64) < min_share * total as f64 {
            continue;
        }
        let first = page.events[node.open as usize..]
            .iter()
            .take_while(|e| **e != Event::Close(id as u32))
            .find_map(|e| match e {
                Event::Text { start, end, .. } => {
                    let t = page.text[*start as usize..*end as usize].trim();
                    (!t.is_empty()).then_some(t)
                }
                _ => None,
            })
            .unwrap_or("");
        let first: String = first.chars().take(40).collect();
        let _ = writeln!(
            out,
            "{:indent$}#{id}{} {:?} {:?} flags={:#x} raw={} ({:.0}%) clean={} | {first}",
            "",
            if analysis.removed[id] { " REMOVED" } else { "" },
            node.kind,
            node.group,
            node.flags,
            raw[id],
            100.0 * raw[id] as f64 / total as f64,
            analysis.clean[id],
            indent = depth[id].min(40) * 2,
        );
    }
    out
}

/// Whether node `i` is `a` or inside it.
fn within(page: &Page, i: usize, a: usize) -> bool {
    i == a || (page.nodes[i].open > page.nodes[a].open && page.nodes[i].open < page.nodes[a].close)
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
    /// Where each line written starts in `out`, and what it is.
    written: Vec<(usize, LineKind)>,
    /// Keep link-heavy lines too.
    keep_links: bool,
    /// The line is preformatted: keep its leading whitespace.
    indent: bool,
    /// The line is a heading (kept whatever its links: the titles of a listing).
    heading: bool,
    /// Hashes of the lines written of at least [`REPEAT_MIN`] bytes, outside `<pre>`.
    seen: std::collections::HashSet<u64, foldhash::fast::FixedState>,
}

/// A link line this long (non-space bytes) is a title, not a menu item: kept.
const LONG_LINK_LINE: usize = 30;

/// A line of this many non-space bytes or more that was already written is left out:
/// the same paragraph twice on a page is a copy for another screen size, a quote of an
/// earlier post, a teaser repeated (code in `<pre>` is exempt).
const REPEAT_MIN: usize = 30;

fn line_hash(line: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    line.hash(&mut h);
    h.finish()
}

impl Lines<'_> {
    fn flush(&mut self) {
        let line = self.line.trim_end();
        // Table rows are kept whatever their links, as the reference extractor keeps
        // tables; other lines must be mostly text.
        let text_enough = self.keep_links
            || self.cells > 0
            || self.heading
            || self.solid >= LONG_LINK_LINE
            || (self.linked as f64) <= self.opts.max_link_density * self.solid as f64;
        if !text_enough {
            self.dropped += self.solid;
        }
        let repeated = text_enough
            && !self.indent
            && self.cells == 0
            && self.solid >= REPEAT_MIN
            && !self.seen.insert(line_hash(line.trim_start()));
        if self.solid > 0 && text_enough && !repeated {
            self.kept += self.solid;
            if !self.out.is_empty() {
                self.out.push('\n');
            }
            // Only `precision` acts on what a heading opens.
            let titled = self.heading && self.opts.favor == Favor::Precision;
            let kind = if let Some(kind) = titled.then(|| heading_kind(line)).flatten() {
                kind
            } else if self.linked * 2 > self.solid {
                if self.cells == 0 && !self.heading && self.solid >= LONG_LINK_LINE {
                    LineKind::LinkTitle
                } else {
                    LineKind::Other
                }
            } else if self.solid >= PROSE_MIN as usize {
                LineKind::Prose
            } else {
                LineKind::Other
            };
            self.written.push((self.out.len(), kind));
            self.out.push_str(self.prefix);
            self.out
                .push_str(if self.indent { line } else { line.trim_start() });
        }
        self.indent = false;
        self.heading = false;
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

/// Titles of a comment section, lowercase, with any count before them ("12 Comments")
/// or after them in brackets ("Comments (3)") and a closing colon taken off.
const COMMENTS_TITLES: &[&str] = &[
    "comment",
    "comments",
    "reader comments",
    "leave a reply",
    "leave a comment",
    "post a comment",
    "add a comment",
    "add comment",
    "join the discussion",
];

/// Beginnings of a comment section's title that must follow a count ("12 Responses to
/// “A post”", "3 thoughts on “A post”"): without one they may title a section of the
/// article.
const COUNTED_COMMENTS_TITLES: &[&str] = &[
    "responses to ",
    "response to ",
    "thoughts on ",
    "thought on ",
    "replies to ",
    "reply to ",
    "comments on ",
    "comments to ",
];

/// What a heading opens, by its text: a comment section or a list of related pages.
fn heading_kind(line: &str) -> Option<LineKind> {
    if line.len() > 200 {
        return None;
    }
    let lower = line.trim().to_lowercase();
    if comments_title(&lower) {
        Some(LineKind::CommentsHeading)
    } else if RELATED_TITLES.contains(&lower.trim_end_matches([':', '»', '›', ' '])) {
        Some(LineKind::RelatedHeading)
    } else {
        None
    }
}

/// Whether a heading's text, trimmed and lowercase, is a comment section's title.
fn comments_title(lower: &str) -> bool {
    let mut title = lower.trim_end_matches(':').trim_end();
    if let Some(open) = title.rfind('(')
        && title.ends_with(')')
        && title[open + 1..title.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        title = title[..open].trim_end();
    }
    let rest = title.trim_start_matches(|c: char| c.is_ascii_digit());
    let counted = rest.len() < title.len() && rest.starts_with(' ');
    let rest = rest.trim_start();
    COMMENTS_TITLES.contains(&rest)
        || counted && COUNTED_COMMENTS_TITLES.iter().any(|t| rest.starts_with(t))
}

/// Titles of a list of related pages, lowercase, a closing colon or arrow taken off.
const RELATED_TITLES: &[&str] = &[
    "related",
    "related posts",
    "related articles",
    "related stories",
    "related content",
    "related links",
    "related news",
    "related coverage",
    "related reading",
    "you may also like",
    "you might also like",
    "you may like",
    "you might like",
    "more stories",
    "more news",
    "more articles",
    "more posts",
    "most popular",
    "most read",
    "most viewed",
    "most shared",
    "most emailed",
    "most commented",
    "top stories",
    "recommended",
    "recommended for you",
    "recommended stories",
    "trending",
    "trending now",
    "popular posts",
    "popular stories",
    "popular articles",
    "recent posts",
    "latest news",
    "latest posts",
    "latest stories",
    "more like this",
    "what to read next",
];

/// Link text a page must drop before it can count as a link index (a menu of a few
/// links beside no text is boilerplate, not an index).
const LINK_INDEX_MIN: usize = 200;

/// What a line written is, for trimming what follows an article.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    /// [`PROSE_MIN`] non-space bytes or more, at most half of them in links.
    Prose,
    /// A link of [`LONG_LINK_LINE`] bytes or more, outside tables and headings: the
    /// title of another page.
    LinkTitle,
    /// A heading that opens a comment section ("Comments", "12 Responses to …",
    /// "Leave a Reply").
    CommentsHeading,
    /// A heading that opens a list of links to related pages ("Related stories").
    RelatedHeading,
    Other,
}

/// With `favor = "precision"`, on a page that declares itself an article (`og:type`,
/// or a single element saying it is a post: hAtom's `hentry`, a schema.org `Article`,
/// `NewsArticle` or `BlogPosting` item), not a product: from this
/// many titles of other pages after the article's last paragraph on, what follows
/// that paragraph is a list of related stories, and goes (with its heading).
const RELATED_TAIL_TITLES: usize = 2;

fn render(
    page: &Page,
    from: usize,
    to: usize,
    removed: &[bool],
    opts: &Options,
    comments_go: bool,
) -> String {
    let (mut text, kept, dropped, written) = render_lines(page, from, to, removed, opts, false);
    if dropped >= LINK_INDEX_MIN && dropped as f64 > opts.link_index_ratio * kept as f64 {
        return render_lines(page, from, to, removed, opts, true).0;
    }
    if opts.favor == Favor::Precision
        && (page.og_article || page.entries == 1)
        && !page.product
        && let Some(last) = written.iter().rposition(|w| w.1 == LineKind::Prose)
        && let Some(&(tail, _)) = written.get(last + 1)
        && written[last + 1..]
            .iter()
            .filter(|w| w.1 == LineKind::LinkTitle)
            .count()
            >= RELATED_TAIL_TITLES
    {
        // `tail` starts a line after a newline.
        text.truncate(tail - 1);
    }
    // A comment section's heading after the article's first paragraph: the comments
    // go with it however they are marked up (a 2007 blog's comments carry no class).
    if opts.favor == Favor::Precision
        && comments_go
        && let Some(first) = written.iter().position(|w| w.1 == LineKind::Prose)
        && let Some(&(at, _)) = written[first..]
            .iter()
            .find(|w| w.1 == LineKind::CommentsHeading)
        && at > 0
        && at <= text.len()
    {
        // `at` starts a line after a newline.
        text.truncate(at - 1);
    }
    // Headings of related links, on a page with an article (as for its comments) that
    // is no site's front page (a front page's "Latest news" are its content).
    if opts.favor == Favor::Precision
        && comments_go
        && !page.front_page
        && written.iter().any(|w| w.1 == LineKind::RelatedHeading)
    {
        text = drop_related_sections(&text, &written);
    }
    text
}

/// Drops each related-links section: a heading that names one ("Related stories",
/// "Most popular") and the lines after it up to the next paragraph (or a comment
/// section's heading).
fn drop_related_sections(text: &str, written: &[(usize, LineKind)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut dropping = false;
    for (i, &(start, kind)) in written.iter().enumerate() {
        if start > text.len() {
            break;
        }
        let end = written
            .get(i + 1)
            .map_or(text.len(), |w| w.0.saturating_sub(1))
            .min(text.len());
        match kind {
            LineKind::RelatedHeading => dropping = true,
            LineKind::Prose | LineKind::CommentsHeading => dropping = false,
            _ => {}
        }
        if dropping {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&text[start..end]);
    }
    out
}

fn render_lines(
    page: &Page,
    from: usize,
    to: usize,
    removed: &[bool],
    opts: &Options,
    keep_links: bool,
) -> (String, usize, usize, Vec<(usize, LineKind)>) {
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
        written: Vec::new(),
        keep_links,
        seen: Default::default(),
        heading: false,
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
                    Kind::Block => {
                        lines.flush();
                        lines.heading = crate::html::HEADINGS.contains(&node.name);
                    }
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
    (lines.out, lines.kept, lines.dropped, lines.written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::parse;

    fn text(html: &str) -> String {
        main_text(&parse(html, 1_000_000), &Options::default())
    }

    #[test]
    fn comment_and_related_section_titles() {
        for title in [
            "Comments",
            "12 Comments",
            "Comments (3)",
            "Comments:",
            "Leave a Reply",
            "7 Responses to “Harbour wall repaired”",
            "3 thoughts on \"Gift cards\"",
        ] {
            assert_eq!(
                heading_kind(title),
                Some(LineKind::CommentsHeading),
                "{title}"
            );
        }
        for title in [
            "Response",
            "Responses to the consultation",
            "Comments on the draft",
            "Code comments",
            "Comments in TOML",
        ] {
            assert_eq!(heading_kind(title), None, "{title}");
        }
        for title in ["Related stories", "MOST POPULAR", "You may also like:"] {
            assert_eq!(
                heading_kind(title),
                Some(LineKind::RelatedHeading),
                "{title}"
            );
        }
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
        assert!(got.contains("- Chapter 1: working"), "{got}");
        assert_eq!(got.matches("- Chapter").count(), 20, "{got}");
        // A few menu links beside no text stay out.
        assert_eq!(
            text(r#"<body><p><a href="/">Home</a> <a href="/a">About</a></p></body>"#),
            ""
        );
    }

    #[test]
    fn hidden_prose_stays_hidden_chrome_goes() {
        let html = r#"<body><h1>Questions</h1><p>What follows are the questions our readers ask most often about the ferry.</p>
            <div class="faq-answer" hidden><p>The ferry leaves every hour from the north pier, and the crossing takes twenty minutes.</p></div>
            <div aria-hidden="true"><span>Open menu</span></div>
            <div style="display: none">Loading…</div></body>"#;
        assert_eq!(
            text(html),
            "Questions\nWhat follows are the questions our readers ask most often about the ferry.\nThe ferry leaves every hour from the north pier, and the crossing takes twenty minutes."
        );
    }

    #[test]
    fn repeated_paragraphs_once_and_article_headers_kept() {
        let html = r#"<body><header class="site-header"><a href="/">Home</a> Tide tables for every harbour</header>
            <article><header><h1>Spring tides</h1><p>Why the highest tides come twice a month, and when to expect them.</p></header>
            <p>The sun and the moon pull on the sea together at new and full moon.</p>
            <div class="mobile-only"><p>The sun and the moon pull on the sea together at new and full moon.</p></div>
            <pre>tide
tide</pre></article></body>"#;
        assert_eq!(
            text(html),
            "Spring tides\nWhy the highest tides come twice a month, and when to expect them.\nThe sun and the moon pull on the sea together at new and full moon.\ntide\ntide"
        );
    }

    #[test]
    fn listing_titles_are_kept_though_they_are_links() {
        let html = r#"<body><h1>Air fryer recipes</h1><p>Quick dinners for busy weeknights, all made in the air fryer.</p>
            <article><h2><a href="/salmon">Sticky salmon bites</a></h2><p>Ready in fifteen minutes with a honey glaze.</p></article>
            <article><h2><a href="/tacos">Fish tacos with mango salsa</a></h2><p>Crisp fish, sweet salsa and warm tortillas.</p></article>
            <p><a href="/page/2">Next page</a></p></body>"#;
        let got = text(html);
        assert!(
            got.contains("Sticky salmon bites\nReady in fifteen"),
            "{got}"
        );
        assert!(got.contains("Fish tacos with mango salsa"), "{got}");
        assert!(!got.contains("Next page"), "{got}");
    }

    #[test]
    fn long_comment_sections_go_unless_the_page_is_a_discussion() {
        let para = "The spray keeps aphids off the beans for a week, and rain does not wash it away quickly. ";
        let comment = |i: usize| {
            format!(
                "<li class=\"comment\"><p class=\"comment-author\">Reader {i}</p>\
                 <div class=\"comment-content\"><p>Comment {i}: I tried this on my roses \
                 and it worked better than anything from the store, thank you so much.</p></div></li>"
            )
        };
        let html = format!(
            "<body><article class=\"post entry\"><h1>Garden spray</h1><p>{}</p></article>\
             <div id=\"comments\" class=\"entry-comments\"><h3>40 Comments</h3>\
             <ol class=\"comment-list\">{}</ol></div></body>",
            para.repeat(20),
            (0..40).map(comment).collect::<String>()
        );
        let mut page = parse(&html, 1_000_000);
        // A blog post: its long comment section is not its text.
        let blog = main_text(&page, &Options::default());
        assert!(blog.starts_with("The spray keeps aphids"), "{blog}");
        assert!(!blog.contains("Comment 7"), "{blog}");
        // The same markup at a forum's address: the replies are the thread.
        page.discussion = true;
        let thread = main_text(&page, &Options::default());
        assert!(thread.contains("Comment 7"), "{thread}");
        assert!(thread.contains("The spray keeps aphids"), "{thread}");
    }

    #[test]
    fn headers_of_repeated_cards_are_their_titles() {
        let card = |i: usize| {
            format!(
                "<div class=\"item-card\"><div class=\"item-card__header\"><a href=\"/i/{i}\">\
                 <h3>Hand-thrown stoneware mug number {i}</h3></a></div>\
                 <div class=\"item-card__body\"><p>A glazed mug that holds a large coffee, {i}.</p></div></div>"
            )
        };
        let html = format!(
            "<body><div class=\"site-header\"><p>Free shipping on every order over fifty dollars today</p></div>\
             <div class=\"grid\">{}</div></body>",
            (0..6).map(card).collect::<String>()
        );
        let text = text(&html);
        assert!(
            text.contains("Hand-thrown stoneware mug number 4"),
            "{text}"
        );
        // One class-marked header: the site's masthead, gone.
        let one = "<body><div class=\"site-header\"><p>Free shipping on every order over fifty dollars today</p></div>\
             <article><p>The mug holds a large coffee and keeps it warm for a long while.</p></article></body>";
        assert_eq!(
            self::text(one),
            "The mug holds a large coffee and keeps it warm for a long while."
        );
    }

    #[test]
    fn a_declared_article_keeps_a_short_post_without_its_comments() {
        let comment = |i: usize| {
            format!(
                "<li class=\"comment\"><div class=\"comment-content\"><p>Comment {i}: what a \
                 lovely list, I have watched half of these with my family over the holidays.</p></div></li>"
            )
        };
        let page = |og: &str| {
            format!(
                "<html><head>{og}</head><body><article class=\"post entry\">\
                 <p>Day eight of the comfort watches: a film about a bakery, a town and a dog \
                 that knows when the bread is ready. Tell me yours below, and be kind.</p>\
                 <p>Tomorrow: the one with the train, which everybody already knows by heart.</p>\
                 <p>The day after, a quiet one about a lighthouse keeper and his radio, for \
                 the evenings when nobody wants to talk and everybody wants the sea. Bring \
                 a blanket and a pot of tea.</p></article>\
                 <div id=\"comments\"><ol class=\"comment-list\">{}</ol></div></body></html>",
                (0..30).map(comment).collect::<String>()
            )
        };
        // A short post (under 1,000 bytes of prose): with `balanced`, its comments
        // could be a thread's posts, and stay, unless the page says it is an article.
        let balanced = Options {
            favor: Favor::Balanced,
            ..Options::default()
        };
        let run = |html: &str, opts: &Options| main_text(&parse(html, 1_000_000), opts);
        let declared = page("<meta property=\"og:type\" content=\"article\">");
        let undeclared = run(&page(""), &balanced);
        assert!(undeclared.contains("Comment 12"), "{undeclared}");
        let text = run(&declared, &balanced);
        assert!(text.contains("Day eight"), "{text}");
        assert!(!text.contains("Comment 12"), "{text}");
        // With `precision`, the default, they go either way.
        for html in [page(""), declared] {
            let text = run(&html, &Options::default());
            assert!(text.contains("Day eight"), "{text}");
            assert!(!text.contains("Comment 12"), "{text}");
        }
    }

    #[test]
    fn front_page_addresses() {
        for url in [
            "https://shop.example",
            "https://shop.example/",
            "https://shop.example/?ref=ad",
            "http://shop.example/#top",
        ] {
            assert!(front_page_url(url), "{url}");
        }
        for url in [
            "https://shop.example/blog/",
            "https://shop.example/index.html",
            "https://page.invalid/R491",
            "",
            "shop.example",
        ] {
            assert!(!front_page_url(url), "{url}");
        }
    }

    #[test]
    fn discussion_addresses() {
        for url in [
            "https://www.example.com/forum/consulting/is-it-worth-it",
            "https://community.example.io/t/stuck-on-update/71234",
            "https://example.com/viewtopic.php?t=12",
            "https://www.reddit.com/r/rust/comments/abc123/title/",
            "https://cooking.stackexchange.com/questions/123/why",
        ] {
            assert!(discussion_url(url), "{url}");
        }
        for url in [
            "https://www.example.com/2015/07/organic-pest-control-garden-spray.html",
            "https://shop.example.com/products/socks?topic=forum",
            "https://example.com/blog/threading-a-needle",
        ] {
            assert!(!discussion_url(url), "{url}");
        }
    }

    #[test]
    fn wrappers_with_boilerplate_names_are_kept() {
        let html = r#"<body><div class="page-with-sidebar"><p>All of the text is in here and it is long.</p></div>
            <div class="sidebar">short</div></body>"#;
        assert_eq!(text(html), "All of the text is in here and it is long.");
    }

    #[test]
    fn hidden_preformatted_copies_are_dropped() {
        // A hidden raw copy of the article (markdown for a "copy" button) is not a
        // collapsed answer a reader opens.
        let html = r#"<body><article><h1>Knots every sailor should know by heart</h1><p>The bowline makes a fixed loop at the end of a line and is easy to untie.</p>
            <pre hidden aria-hidden="true"># Knots

The bowline makes a fixed loop at the end of a line and is easy to untie.</pre></article></body>"#;
        assert_eq!(
            text(html),
            "Knots every sailor should know by heart\nThe bowline makes a fixed loop at the end of a line and is easy to untie."
        );
    }

    #[test]
    fn highlighted_code_keeps_its_comments() {
        // A highlighter's `comment` spans are code, not a comment section.
        let html = r#"<body><article><p>Start a repository and record the first state of the files in it.</p>
            <pre><code class="language-bash"><span class="hljs-comment"># make a repository</span>
git init
<span class="token comment"># record the files</span>
git commit -am "first"</code></pre></article></body>"#;
        assert_eq!(
            text(html),
            "Start a repository and record the first state of the files in it.\n# make a repository\ngit init\n# record the files\ngit commit -am \"first\""
        );
    }

    #[test]
    fn root_goes_into_the_body_of_the_article() {
        // The `<main>` holds the article body and a carousel of other posts; the body,
        // content-marked, holds most of it and is the content.
        let mut html = String::from(
            r#"<body><main><div class="post-content">
            <p>Set the top of the monitor at eye height and an arm's length away from you.</p>
            <p>Keep the wrists straight on the keyboard, with the elbows bent at a right angle.</p>
            <p>Feet flat on the floor, or on a footrest when the chair is high for the desk.</p>
            <p>Stand up and walk a little every half hour, whatever the chair costs.</p>
            </div><div class="carousel">"#,
        );
        for k in 1..=2 {
            html.push_str(&format!(
                r#"<div class="card"><a href="/p{k}">Other post number {k} from the blog</a><p>A teaser of the other post, {k}.</p></div>"#
            ));
        }
        html.push_str("</div></main></body>");
        let got = text(&html);
        assert!(got.starts_with("Set the top of the monitor"), "{got}");
        assert!(got.ends_with("whatever the chair costs."), "{got}");
    }

    #[test]
    fn posts_of_a_thread_stay_together() {
        // Each post body is content-marked inside its own wrapper: the first, long one
        // does not become the root alone.
        let html = r#"<body><main><div class="topic">
            <div class="wrap"><div class="post"><p>My boat's outboard stalls after ten minutes at full throttle, every time, even with fresh fuel in the tank and a new plug. The filter is clean and the line has no kinks. It idles fine for an hour. What else should I look at before taking it to the yard?</p></div></div>
            <div class="wrap"><div class="post"><p>Check the fuel tank vent: a closed vent starves the engine.</p></div></div>
            </div></main></body>"#;
        let got = text(html);
        assert!(got.contains("tank vent"), "{got}");
        assert!(got.contains("outboard stalls"), "{got}");
    }

    #[test]
    fn panels_beside_the_largest_widget_panel_stay() {
        // A page builder puts every section in a `widget`; the largest holds over half
        // the page and is a wrapper, the others are its parallels, not a sidebar.
        let html = r#"<body><div class="layout">
            <div class="row"><div class="cell"><div class="panel widget widget_text"><p>Ask for the salary range before the first interview, so that both sides know where they stand.</p></div></div></div>
            <div class="row"><div class="cell"><div class="panel widget widget_text"><p>Wait for a written offer before you negotiate: that is when you have the most leverage with them.</p>
            <p>Know your value: research what people in the same role earn in your city, and name a range.</p>
            <p>Think beyond the salary: leave, training and remote days can be negotiated as well.</p></div></div></div>
            </div><div class="sidebar"><div class="widget"><a href="/a">Appointments</a></div></div></body>"#;
        let got = text(html);
        assert!(got.starts_with("Ask for the salary range"), "{got}");
        assert!(got.ends_with("can be negotiated as well."), "{got}");
        assert!(!got.contains("Appointments"), "{got}");
    }

    #[test]
    fn forms_go_unless_they_hold_the_page() {
        let html = r#"<body><article><p>Our drivers collect the parcel from your door the next working day, anywhere in the country.</p>
            <form method="post"><label>Your email</label><input name="e"><p>This field is for validation purposes and should be left unchanged.</p></form></article></body>"#;
        assert_eq!(
            text(html),
            "Our drivers collect the parcel from your door the next working day, anywhere in the country."
        );
        // A page wrapped whole in a form keeps its text.
        let html = r#"<body><form id="aspnetForm"><div><p>Opening hours of the town library, from Monday to Saturday.</p>
            <p>The reading room closes half an hour before the library itself does.</p></div></form></body>"#;
        assert!(text(html).contains("The reading room closes"));
    }

    #[test]
    fn figure_captions_go() {
        let html = r#"<body><article><p>The lighthouse was built in 1874 from granite quarried on the island itself.</p>
            <figure><img src="l.jpg" alt=""><figcaption>The lighthouse at dusk. Photo: harbour archive</figcaption></figure>
            <p>Its lamp was electrified in 1952, and the last keeper left in 1987.</p></article></body>"#;
        assert_eq!(
            text(html),
            "The lighthouse was built in 1874 from granite quarried on the island itself.\nIts lamp was electrified in 1952, and the last keeper left in 1987."
        );
    }

    #[test]
    fn no_body_and_plain_text() {
        assert_eq!(text("just text &lt;3"), "just text <3");
        assert_eq!(text(""), "");
    }
}
