//! What class, id and role values say about an element.
//!
//! Values are split into words (at spaces, `-`, `_`, `:` and lower→upper case steps, so
//! `site-footer`, `footer_widget` and `footerLinks` all hold the word `footer`) and the
//! words are looked up in small tables. Matching whole words rather than substrings
//! keeps `mw-hide-empty-elt` from reading as "hide" and `has-sidebar` on a page wrapper
//! from reading as a sidebar of its own… only as the word `sidebar`, which the
//! extractor then weighs against how much of the page the element holds.

/// Flags an element can get from its attributes.
pub const HIDDEN: u16 = 1;
pub const CONTENT: u16 = 2;
/// Per-post chrome of forums and comment threads: user cards, signatures, votes.
pub const CHROME: u16 = 4;
/// A class or id naming a post's or an article's body (`entry-content`, `post-body`,
/// `article-body`), or `itemprop="articleBody"`.
pub const POST_BODY: u16 = 8;

/// Groups of boilerplate words. The extractor sums the text of each group's elements:
/// a group that holds most of a page is its content (the posts of a thread are
/// `comment`s, the items of a shop are `product`s), not boilerplate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Group {
    #[default]
    None = 0,
    Navigation,
    Header,
    Footer,
    Sidebar,
    Comments,
    Share,
    Related,
    Ads,
    Consent,
    Meta,
    Widgets,
    /// `<noscript>`: what a browser without scripts shows. Usually a note or a
    /// tracking pixel; on pages rendered by scripts (Discourse forums), the page itself.
    Noscript,
}

/// Number of groups (for per-group tables).
pub const GROUPS: usize = 13;

/// Whole words (or word prefixes ending in `*`) and their group.
const WORDS: &[(&str, Group)] = &[
    ("nav", Group::Navigation),
    ("navbar", Group::Navigation),
    ("navigation", Group::Navigation),
    ("subnav", Group::Navigation),
    ("menu*", Group::Navigation),
    ("megamenu", Group::Navigation),
    ("breadcrumb*", Group::Navigation),
    ("crumbs", Group::Navigation),
    ("pagination", Group::Navigation),
    ("pager", Group::Navigation),
    ("skip", Group::Navigation),
    ("masthead", Group::Header),
    ("header", Group::Header),
    ("topbar", Group::Header),
    ("footer*", Group::Footer),
    ("copyright", Group::Footer),
    ("colophon", Group::Footer),
    ("sidebar*", Group::Sidebar),
    ("aside", Group::Sidebar),
    ("rail", Group::Sidebar),
    ("comment*", Group::Comments),
    ("disqus*", Group::Comments),
    ("respond", Group::Comments),
    ("replies", Group::Comments),
    ("share*", Group::Share),
    ("sharing", Group::Share),
    ("sharedaddy", Group::Share),
    ("social*", Group::Share),
    ("sociable", Group::Share),
    ("related*", Group::Related),
    ("recommend*", Group::Related),
    ("popular", Group::Related),
    ("recent", Group::Related),
    ("trending", Group::Related),
    ("more-stories", Group::Related),
    ("outbrain*", Group::Related),
    ("taboola*", Group::Related),
    ("ad", Group::Ads),
    ("ads", Group::Ads),
    ("adsbygoogle", Group::Ads),
    ("advert*", Group::Ads),
    ("sponsor*", Group::Ads),
    ("promo*", Group::Ads),
    ("banner", Group::Ads),
    ("cookie*", Group::Consent),
    ("consent*", Group::Consent),
    ("gdpr", Group::Consent),
    ("newsletter*", Group::Consent),
    ("subscribe*", Group::Consent),
    ("subscription", Group::Consent),
    ("signup", Group::Consent),
    ("popup*", Group::Consent),
    ("modal*", Group::Consent),
    ("paywall", Group::Consent),
    ("login", Group::Consent),
    ("byline", Group::Meta),
    ("author*", Group::Meta),
    ("meta", Group::Meta),
    ("metadata", Group::Meta),
    ("postmeta", Group::Meta),
    ("postmetadata", Group::Meta),
    ("credit*", Group::Meta),
    ("tags", Group::Meta),
    ("tagcloud", Group::Meta),
    ("taglist", Group::Meta),
    ("timestamp", Group::Meta),
    ("dateline", Group::Meta),
    ("widget*", Group::Widgets),
    ("toolbar", Group::Widgets),
    ("editsection", Group::Widgets),
    ("search*", Group::Widgets),
];

/// Per-post chrome of forums and comment threads, matched inside the value with `-`
/// and `_` taken out (`message-userDetails` holds `userdetails`).
const CHROME_PARTS: &[&str] = &[
    "avatar",
    "signature",
    "userinfo",
    "userdetails",
    "userextras",
    "usercard",
    "userstats",
    "authorinfo",
    "memberinfo",
    "postprofile",
    "postuser",
    "posterinfo",
    "votecell",
    "voting",
    "reactionsbar",
    "likesbar",
];

/// Words that mark a post's or an article's body, written without the `-` and `_`
/// that join their parts: they are looked for in the value with those taken out, so
/// `article-content`, `article__content` and `articleContent` all match
/// `articlecontent`. They mark main content ([`CONTENT`]) and more surely than a tag
/// or a page-wide name does ([`POST_BODY`]).
const POST_WORDS: &[&str] = &[
    "articlebody",
    "articlecontent",
    "articletext",
    "entrycontent",
    "postcontent",
    "postbody",
    "posttext",
    "storybody",
    "storycontent",
    "blogcontent",
    "singlecontent",
    "entrybody",
    "postentry",
];

/// Post-body names that are too short to look for inside other words (`art-content`
/// is in `cart-contents`): they match as whole words in a row, however joined.
const POST_WORD_PAIRS: &[[&str; 2]] = &[["art", "content"]];

/// Other words that mark main content, looked for the same way: a page's or a
/// component's (`main-content`, `text-content`, MediaWiki's `mw-parser-output`).
const CONTENT_WORDS: &[&str] = &[
    "maincontent",
    "pagecontent",
    "bodytext",
    "mwparseroutput",
    "markdownbody",
    "contentbody",
    "textcontent",
];

/// Class words that hide an element.
const HIDE_CLASSES: &[&str] = &[
    "hidden",
    "hide",
    "d-none",
    "is-hidden",
    "visually-hidden",
    "visuallyhidden",
    "sr-only",
    "screen-reader-text",
    "invisible",
    "noprint",
];

/// Calls `f` with each word of a class or id value, lowercased into `buf`.
#[cfg(test)]
fn for_words(value: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for token in value.split_ascii_whitespace() {
        for_token_words(token, buf, &mut f);
    }
}

/// Calls `f` with each word of one whitespace-free token, lowercased into `buf`. Bytes
/// rather than characters: the separators and case steps are ASCII, and the bytes of
/// other characters only end a run of lowercase letters, as the characters do.
fn for_token_words(token: &str, buf: &mut String, f: &mut impl FnMut(&str)) {
    buf.clear();
    buf.push_str(token);
    buf.make_ascii_lowercase();
    let mut start = 0;
    let mut prev_lower = false;
    for (i, &b) in token.as_bytes().iter().enumerate() {
        let separator = matches!(b, b'-' | b'_' | b':' | b'.' | b'/');
        if separator || (b.is_ascii_uppercase() && prev_lower) {
            if i > start {
                f(&buf[start..i]);
            }
            prev_lower = false;
            if separator {
                start = i + 1;
                continue;
            }
            start = i;
        }
        prev_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
    }
    if token.len() > start {
        f(&buf[start..]);
    }
}

/// [`WORDS`] for lookup: whole words by value, prefixes by their first byte in table
/// order, each with its place in the table (the first pattern of the table that
/// matches a word wins).
struct WordTable {
    whole: std::collections::HashMap<&'static str, (usize, Group), foldhash::fast::FixedState>,
    prefixes: Vec<Vec<(&'static str, usize, Group)>>,
}

fn word_table() -> &'static WordTable {
    static TABLE: std::sync::OnceLock<WordTable> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = WordTable {
            whole: Default::default(),
            prefixes: vec![Vec::new(); 256],
        };
        for (i, &(pattern, group)) in WORDS.iter().enumerate() {
            match pattern.strip_suffix('*') {
                Some(prefix) => {
                    let first = prefix.as_bytes().first().copied().unwrap_or(0);
                    table.prefixes[usize::from(first)].push((prefix, i, group));
                }
                None => {
                    table.whole.entry(pattern).or_insert((i, group));
                }
            }
        }
        table
    })
}

/// The group of the first pattern of [`WORDS`] that matches `word` (not empty).
fn word_group(word: &str) -> Option<Group> {
    let table = word_table();
    let whole = table.whole.get(word).copied();
    let first = word.as_bytes().first().copied().unwrap_or(0);
    let prefix = table.prefixes[usize::from(first)]
        .iter()
        .find(|(p, _, _)| word.starts_with(p))
        .map(|&(_, i, g)| (i, g));
    match (whole, prefix) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a.1 } else { b.1 }),
        (a, b) => a.or(b).map(|(_, g)| g),
    }
}

/// Which of [`POST_WORDS`], [`CONTENT_WORDS`] and [`CHROME_PARTS`] `compact` holds one
/// of, in one pass of an Aho-Corasick automaton over the three tables (all
/// occurrences reported, so each table's answer is whether any of its words occurs); a
/// plain search per table should the automaton fail to build.
fn parts_held(compact: &[u8]) -> [bool; 3] {
    const TABLES: [&[&str]; 3] = [POST_WORDS, CONTENT_WORDS, CHROME_PARTS];
    static MATCHER: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    let mut held = [false; 3];
    let automaton = MATCHER
        .get_or_init(|| aho_corasick::AhoCorasick::new(TABLES.iter().flat_map(|t| t.iter())).ok());
    match automaton {
        Some(automaton) => {
            let (post, content) = (POST_WORDS.len(), POST_WORDS.len() + CONTENT_WORDS.len());
            for m in automaton.find_overlapping_iter(compact) {
                let p = m.pattern().as_usize();
                held[usize::from(p >= post) + usize::from(p >= content)] = true;
                if held == [true; 3] {
                    break;
                }
            }
        }
        None => {
            for (h, table) in held.iter_mut().zip(TABLES) {
                *h = table
                    .iter()
                    .any(|w| memchr::memmem::find(compact, w.as_bytes()).is_some());
            }
        }
    }
    held
}

/// What a class or id value marks: (flags, boilerplate group).
pub fn classify(value: &str, is_class: bool) -> (u16, Group) {
    let mut flags = 0;
    let mut group = Group::None;
    if is_class
        && value
            .split_ascii_whitespace()
            .any(|t| HIDE_CLASSES.iter().any(|h| t.eq_ignore_ascii_case(h)))
    {
        flags |= HIDDEN;
    }
    // Lowercase without `-` and `_`, as bytes (both changes are ASCII).
    let mut compact = Vec::with_capacity(value.len());
    compact.extend(
        value
            .bytes()
            .filter(|b| *b != b'-' && *b != b'_')
            .map(|b| b.to_ascii_lowercase()),
    );
    let [post, content, chrome] = parts_held(&compact);
    if post {
        flags |= CONTENT | POST_BODY;
    } else if content {
        flags |= CONTENT;
    }
    let trimmed = value.trim();
    if [
        "content", "post", "entry", "article", "story", "main", "text",
    ]
    .iter()
    .any(|w| trimmed.eq_ignore_ascii_case(w))
    {
        flags |= CONTENT;
    }
    let mut buf = String::new();
    // Bit i: the previous word was the first of `POST_WORD_PAIRS[i]` (no copy of it).
    let mut after = 0u32;
    let mut visit = |w: &str| {
        if group == Group::None
            && let Some(g) = word_group(w)
        {
            group = g;
        }
        let mut next = 0u32;
        for (i, [first, second]) in POST_WORD_PAIRS.iter().enumerate() {
            if after & (1 << i) != 0 && w == *second {
                flags |= CONTENT | POST_BODY;
            }
            if w == *first {
                next |= 1 << i;
            }
        }
        after = next;
    };
    // Layout modifiers (`has-sidebar`, `has-rail-right`, `no-sidebar`, `with-header`)
    // say what sits beside an element, not what it is: they name no group.
    for token in value.split_ascii_whitespace() {
        if is_class && is_layout_modifier(token) {
            continue;
        }
        for_token_words(token, &mut buf, &mut visit);
    }
    if chrome {
        flags |= CHROME;
    }
    // A value that names the content as well ("article-content no_toc_section") is
    // content.
    if flags & CONTENT != 0 {
        group = Group::None;
    }
    (flags, group)
}

/// Whether a class token describes the element's layout (`has-…`, `with-…`, `no-…`,
/// `without-…`).
fn is_layout_modifier(token: &str) -> bool {
    [
        "has-", "has_", "with-", "with_", "no-", "no_", "without-", "without_",
    ]
    .iter()
    .any(|p| {
        token
            .as_bytes()
            .get(..p.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(p.as_bytes()))
    })
}

/// What an ARIA role marks.
pub fn role(value: &str) -> (u16, Group) {
    match value.to_ascii_lowercase().as_str() {
        "navigation" | "menu" | "menubar" | "tablist" => (0, Group::Navigation),
        "banner" => (0, Group::Header),
        "contentinfo" => (0, Group::Footer),
        "complementary" => (0, Group::Sidebar),
        "search" | "toolbar" => (0, Group::Widgets),
        "dialog" | "alertdialog" | "alert" => (0, Group::Consent),
        "main" | "article" => (CONTENT, Group::None),
        _ => (0, Group::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_words(v, &mut String::new(), |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn values_split_into_words() {
        assert_eq!(words("site-footer x_y"), ["site", "footer", "x", "y"]);
        assert_eq!(words("footerLinks"), ["footer", "links"]);
        assert_eq!(words("HTMLBody"), ["htmlbody"]);
    }

    #[test]
    fn the_word_table_finds_what_a_walk_of_the_patterns_finds() {
        let walk = |word: &str| {
            WORDS.iter().find_map(|&(p, g)| {
                let hit = match p.strip_suffix('*') {
                    Some(prefix) => word.starts_with(prefix),
                    None => word == p,
                };
                hit.then_some(g)
            })
        };
        for &(p, _) in WORDS {
            let stem = p.trim_end_matches('*');
            for word in [
                stem.to_string(),
                format!("{stem}s"),
                format!("{stem}bar"),
                stem[..stem.len().min(3)].to_string(),
                format!("x{stem}"),
            ] {
                assert_eq!(word_group(&word), walk(&word), "{word}");
            }
        }
    }

    #[test]
    fn groups_and_flags() {
        assert_eq!(classify("site-footer", true).1, Group::Footer);
        // A 2012 WordPress theme's post footer, a "recent posts" widget, a photo credit.
        assert_eq!(classify("postmetadata alt", true).1, Group::Meta);
        assert_eq!(classify("widget_recent_entries", true).1, Group::Widgets);
        assert_eq!(classify("recent-posts", true).1, Group::Related);
        assert_eq!(classify("photo-credit", true).1, Group::Meta);
        assert_eq!(classify("credits", true).1, Group::Meta);
        assert_eq!(classify("mw-hide-empty-elt", true), (0, Group::None));
        assert_eq!(classify("navy-blue", true).1, Group::None);
        assert_eq!(classify("d-none", true).0 & HIDDEN, HIDDEN);
        assert_eq!(classify("message-avatar", true).0 & CHROME, CHROME);
        assert_eq!(classify("entry-content", true).0 & CONTENT, CONTENT);
        // Content words match whatever joins their parts.
        assert_eq!(classify("article__content", true).0 & CONTENT, CONTENT);
        assert_eq!(classify("post_content", true).0 & CONTENT, CONTENT);
        assert_eq!(classify("blogContent", true).0 & CONTENT, CONTENT);
        assert_eq!(classify("contents-list", true).0 & CONTENT, 0);
        // Yahoo's article body, by its two words; not a shop's cart.
        assert_eq!(
            classify("yom-mod yom-art-content ", true).0 & POST_BODY,
            POST_BODY
        );
        assert_eq!(classify("cart-contents", true).0 & CONTENT, 0);
        assert_eq!(classify("minicart-content-wrapper", true).0 & CONTENT, 0);
        assert_eq!(classify("comment-list", true).1, Group::Comments);
        // Layout modifiers name what sits beside the element.
        assert_eq!(classify("main-wrap has-rail-right", true).1, Group::None);
        assert_eq!(classify("page no-sidebar", true).1, Group::None);
        assert_eq!(classify("has-sidebar sidebar-left", true).1, Group::Sidebar);
        assert_eq!(classify("shadow", true).1, Group::None);
    }
}
