//! Thai words as PyThaiNLP 5.4's `newmm-safe` cuts them (datatrove's Thai tokenizer):
//! dictionary maximal matching over Thai Character Cluster boundaries, the fewest words
//! between two unambiguous points, out-of-dictionary runs up to the next place a
//! dictionary word of three or more characters (or a non-Thai run) starts, long texts
//! cut in chunks first; then formatted numbers rejoined and whitespace dropped, as its
//! `word_tokenize` does. The dictionary is PyThaiNLP's `words_th.txt`, cached by
//! `scripts/fetch-models.sh` as `pythainlp-words_th.txt` in the models folder.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::Path;

use regex::Regex;

/// The graph of candidate words grows to this many edges before it is cut.
const MAX_GRAPH_SIZE: usize = 50;
/// Safe mode: texts of this many characters or more are cut in chunks, at a space or a
/// long word between characters 100 and 140.
const SCAN_BEGIN: usize = 100;
const SCAN_END: usize = 140;

/// A dictionary: a character trie.
/// The trie's edges while it is built: (node, character) → node.
type Edges = HashMap<(u32, char), u32, foldhash::fast::FixedState>;

pub struct Thai {
    /// Each node's edges: `edges[first..first + n]`, sorted by character.
    nodes: Vec<(u32, u32)>,
    edges: Vec<(char, u32)>,
    /// The root's children by Thai character (U+0E00 to U+0E7F), `u32::MAX` for none.
    root: [u32; 128],
    ends: Vec<bool>,
    /// The TCC rules without capture groups or look-aheads, for the common case.
    tcc_fast: Regex,
    tcc: Regex,
    /// The TCC alternatives after each of the two with a look-ahead, tried when that
    /// look-ahead fails.
    tcc_after: [Regex; 2],
    /// Which capture groups are the look-ahead alternatives, and the group of their
    /// final optional cluster.
    lookahead: [(usize, usize); 2],
    nonthai: Regex,
}

/// PyThaiNLP's TCC rules, in order (`tcc_p.py`): `c` a consonant, `t` an optional tone
/// mark, `k` an optional final cluster, `d` a lower vowel; `L` marks the look-ahead
/// `(?=[เ-ไก-ฮ]|$)`.
const TCC_RULES: [&str; 30] = [
    "เc็ck",
    "เcctาะk",
    "เccีtยะk",
    "เccีtยLk",
    "เcc็ck",
    "เcิc์ck",
    "เcิtck",
    "เcีtยะ?k",
    "เcืtอะ?k",
    "เc[ิีุู]tยLk",
    "เctา?ะ?k",
    "cัtวะk",
    "c[ัื]tc[ุิะ]?k",
    "c[ิุู]์",
    "c[ะ-ู]tk",
    "cรรc์",
    "c็",
    "ct[ะาำ]?k",
    "ck",
    "แc็c",
    "แcc์",
    "แctะ",
    "แcc็c",
    "แccc์",
    "โctะ",
    "[เ-ไ]ct",
    "ก็",
    "อึ",
    "หึ",
    "",
];

fn expand(rule: &str) -> String {
    rule.replace('k', "(?:cc?[dิ]?[์])?")
        .replace('c', "[ก-ฮ]")
        .replace('t', "[่-๋]?")
        .replace('d', "ูุ")
}

impl Thai {
    /// Reads the word list at `path` (one word per line).
    pub fn open(path: &Path) -> Result<Thai, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut children = Edges::default();
        let mut ends = vec![false];
        for word in text.lines().filter(|l| !l.is_empty()) {
            let mut node = 0u32;
            for c in word.chars() {
                let next = ends.len() as u32;
                node = *children.entry((node, c)).or_insert_with(|| {
                    ends.push(false);
                    next
                });
            }
            ends[node as usize] = true;
        }
        if ends.len() < 1000 {
            return Err(format!("{}: not PyThaiNLP's word list", path.display()));
        }
        let rules: Vec<&str> = TCC_RULES
            .iter()
            .copied()
            .filter(|r| !r.is_empty())
            .collect();
        // Each rule a group; a look-ahead rule's final cluster a group of its own.
        let mut groups = 0;
        let mut lookahead = Vec::new();
        let mut parts = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            groups += 1;
            let group = groups;
            let part = if let Some((head, tail)) = r.split_once('L') {
                groups += 1;
                lookahead.push((group, groups, i));
                format!("({}({}))", expand(head), expand(tail))
            } else {
                format!("({})", expand(r))
            };
            parts.push(part);
        }
        let compile = |alts: &[String]| {
            Regex::new(&format!("^(?:{})", alts.join("|"))).map_err(|e| format!("TCC rules: {e}"))
        };
        let tcc = compile(&parts)?;
        let plain: Vec<String> = rules
            .iter()
            .map(|r| format!("(?:{})", expand(&r.replace('L', ""))))
            .collect();
        let tcc_fast = compile(&plain)?;
        let after = |i: usize| {
            let rest: Vec<String> = rules[i + 1..]
                .iter()
                .map(|r| format!("(?:{})", expand(&r.replace('L', ""))))
                .collect();
            compile(&rest)
        };
        let (a, b) = (lookahead[0], lookahead[1]);
        // The edges laid out by node, each node's sorted by character.
        let mut all: Vec<(u32, char, u32)> =
            children.into_iter().map(|((n, c), t)| (n, c, t)).collect();
        all.sort_unstable();
        let mut nodes = vec![(0u32, 0u32); ends.len()];
        for (i, &(n, _, _)) in all.iter().enumerate() {
            let slot = &mut nodes[n as usize];
            if slot.1 == 0 {
                slot.0 = i as u32;
            }
            slot.1 += 1;
        }
        let edges: Vec<(char, u32)> = all.iter().map(|&(_, c, t)| (c, t)).collect();
        let mut root = [u32::MAX; 128];
        let (first, n) = nodes[0];
        for &(c, t) in &edges[first as usize..(first + n) as usize] {
            if let Some(i) = (c as u32).checked_sub(0x0E00).filter(|&i| i < 128) {
                root[i as usize] = t;
            }
        }
        Ok(Thai {
            nodes,
            edges,
            root,
            ends,
            tcc_fast,
            tcc,
            tcc_after: [after(a.2)?, after(b.2)?],
            lookahead: [(a.0, a.1), (b.0, b.1)],
            nonthai: Regex::new(
                r"^(?:[-a-zA-Z]+|\d+(?:[,\.]\d+)*|[ \t]+|\r?\n|[^\x{0E00}-\x{0E7F} \t\r\n]+)",
            )
            .map_err(|e| e.to_string())?,
        })
    }

    /// The lengths (in characters) of the dictionary words that start `chars`, shortest
    /// first.
    fn prefixes(&self, chars: &[char], out: &mut Vec<usize>) {
        out.clear();
        let mut node = 0u32;
        for (i, &c) in chars.iter().enumerate() {
            match self.child(node, c) {
                Some(n) => {
                    node = n;
                    if self.ends[n as usize] {
                        out.push(i + 1);
                    }
                }
                None => break,
            }
        }
    }

    /// The child of `node` by `c`.
    fn child(&self, node: u32, c: char) -> Option<u32> {
        if node == 0
            && let Some(i) = (c as u32).checked_sub(0x0E00).filter(|&i| i < 128)
        {
            return Some(self.root[i as usize]).filter(|&t| t != u32::MAX);
        }
        let (first, n) = self.nodes[node as usize];
        let edges = &self.edges[first as usize..(first + n) as usize];
        if edges.len() <= 8 {
            edges.iter().find(|e| e.0 == c).map(|e| e.1)
        } else {
            edges
                .binary_search_by_key(&c, |e| e.0)
                .ok()
                .map(|i| edges[i].1)
        }
    }

    /// The length in bytes of the TCC at the start of `s` (0: none).
    fn cluster(&self, s: &str) -> usize {
        let Some(m) = self.tcc_fast.find(s) else {
            return 0;
        };
        // Only the two look-ahead rules hold `ย`: otherwise the first rule that
        // matches is the one found.
        if !m.as_str().contains('ย') {
            return m.end();
        }
        let Some(caps) = self.tcc.captures(s) else {
            return 0;
        };
        for (k, &(rule, cluster)) in self.lookahead.iter().enumerate() {
            if let Some(m) = caps.get(rule) {
                let empty = caps.get(cluster).is_none_or(|c| c.is_empty());
                let next = s[m.end()..].chars().next();
                let ok = !empty || next.is_none_or(|c| matches!(c, 'เ'..='ไ' | 'ก'..='ฮ'));
                if ok {
                    return m.end();
                }
                return self.tcc_after[k].find(s).map_or(0, |m| m.end());
            }
        }
        caps.get(0).map_or(0, |m| m.end())
    }

    /// Which positions (in characters) of `text` end a TCC.
    fn boundaries(&self, text: &str, n: usize) -> Vec<bool> {
        let mut valid = vec![false; n + 1];
        let (mut byte, mut pos) = (0, 0);
        while byte < text.len() {
            // Every rule starts with a Thai character.
            let thai = text[byte..]
                .chars()
                .next()
                .is_some_and(|c| ('\u{0E00}'..='\u{0E7F}').contains(&c));
            let len = match if thai { self.cluster(&text[byte..]) } else { 0 } {
                0 => text[byte..].chars().next().map_or(1, char::len_utf8),
                l => l,
            };
            pos += text[byte..byte + len].chars().count();
            byte += len;
            valid[pos] = true;
        }
        valid
    }

    /// Words of `text` (character spans), newmm's `_onecut`.
    fn onecut(&self, text: &str, out: &mut Vec<(usize, usize)>) {
        let chars: Vec<char> = text.chars().collect();
        let n = chars.len();
        let bytes: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()))
            .collect();
        let valid = self.boundaries(text, n);
        // The graph's edges in the order they were found (newmm's dict of lists).
        let mut graph: Vec<(usize, usize)> = Vec::new();
        let mut graph_size = 0;
        let mut heap: BinaryHeap<Reverse<usize>> = BinaryHeap::from([Reverse(0)]);
        let mut queued: Vec<bool> = vec![false; n + 1];
        queued[0] = true;
        let mut end_pos = 0;
        let mut found = Vec::new();
        while let Some(&Reverse(top)) = heap.peek() {
            if top >= n {
                break;
            }
            heap.pop();
            queued[top] = false;
            let begin = top;
            self.prefixes(&chars[begin..], &mut found);
            for &len in &found {
                let end = begin + len;
                if valid[end] {
                    graph.push((begin, end));
                    graph_size += 1;
                    if !queued[end] {
                        queued[end] = true;
                        heap.push(Reverse(end));
                    }
                    if graph_size > MAX_GRAPH_SIZE {
                        break;
                    }
                }
            }
            match heap.len() {
                1 => {
                    let goal = heap.peek().map_or(n, |r| r.0);
                    let path = bfs(&graph, end_pos, goal);
                    graph_size = 0;
                    graph.clear();
                    for pos in path.into_iter().skip(1) {
                        out.push((end_pos, pos));
                        end_pos = pos;
                    }
                }
                0 => {
                    end_pos = self.skip_end(text, &chars, &bytes, begin, &valid);
                    graph_size = 0;
                    graph.clear();
                    out.push((begin, end_pos));
                    queued[end_pos.min(n)] = true;
                    heap.push(Reverse(end_pos));
                }
                _ => {}
            }
        }
    }

    /// Where an out-of-dictionary word starting at `begin` ends (`_find_skip_end`);
    /// `bytes[i]` is where character `i` starts.
    fn skip_end(
        &self,
        text: &str,
        chars: &[char],
        bytes: &[usize],
        begin: usize,
        valid: &[bool],
    ) -> usize {
        if let Some(m) = self.nonthai.find(&text[bytes[begin]..]) {
            return begin + text[bytes[begin]..bytes[begin] + m.end()].chars().count();
        }
        let mut found = Vec::new();
        for pos in begin + 1..chars.len() {
            if valid[pos] {
                self.prefixes(&chars[pos..], &mut found);
                let word = found.iter().any(|&len| {
                    valid[pos + len]
                        && !(len <= 2
                            && chars[pos..pos + len]
                                .iter()
                                .all(|c| ('ก'..='ฮ').contains(c)))
                });
                if word || self.nonthai.is_match(&text[bytes[pos]..]) {
                    return pos;
                }
            }
        }
        chars.len()
    }

    /// The words of `text`, as datatrove's `ThaiTokenizer` gives them.
    pub fn words<'a>(&self, text: &'a str, out: &mut Vec<&'a str>) {
        let mut spans = Vec::new();
        let mut chunk_start = 0;
        for chunk in chunks(self, text) {
            spans.clear();
            self.onecut(chunk, &mut spans);
            let offsets: Vec<usize> = chunk
                .char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(chunk.len()))
                .collect();
            let base = chunk_start;
            let mut tokens: Vec<&'a str> = spans
                .iter()
                .map(|&(a, b)| &text[base + offsets[a]..base + offsets[b]])
                .collect();
            out.append(&mut tokens);
            chunk_start += chunk.len();
        }
        let joined = rejoin_numbers(text, std::mem::take(out));
        out.extend(joined.into_iter().filter(|w| !w.trim().is_empty()));
    }
}

/// newmm's breadth-first search: the first path from `start` to `goal`, fewest words
/// (`graph` holds at most about 50 edges: linear scans).
fn bfs(graph: &[(usize, usize)], start: usize, goal: usize) -> Vec<usize> {
    let mut parent: Vec<(usize, usize)> = Vec::new();
    let mut seen: Vec<usize> = vec![start];
    let mut queue = VecDeque::from([start]);
    let path_to = |parent: &[(usize, usize)], mut v: usize| {
        let mut path = vec![v];
        while v != start {
            v = parent.iter().find(|p| p.0 == v).map_or(start, |p| p.1);
            path.push(v);
        }
        path.reverse();
        path
    };
    while let Some(vertex) = queue.pop_front() {
        for &(_, pos) in graph.iter().filter(|e| e.0 == vertex) {
            if pos == goal {
                let mut path = path_to(&parent, vertex);
                path.push(goal);
                return path;
            }
            if !seen.contains(&pos) {
                seen.push(pos);
                parent.push((pos, vertex));
                queue.push_back(pos);
            }
        }
    }
    vec![start, goal]
}

/// Safe mode's chunks of `text`: while 140 characters or more are left, a cut at the
/// last space between characters 100 and 140, else before the longest word there.
fn chunks<'a>(thai: &Thai, text: &'a str) -> Vec<&'a str> {
    // Byte offset of every character, and the end.
    let offsets: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let n = offsets.len() - 1;
    let mut out = Vec::new();
    let mut start = 0;
    while n - start >= SCAN_END {
        let sample = &text[offsets[start + SCAN_BEGIN]..offsets[start + SCAN_END]];
        let cut = match sample.rfind(' ') {
            Some(b) => SCAN_BEGIN + sample[..b].chars().count() + 1,
            None => {
                let mut spans = Vec::new();
                thai.onecut(sample, &mut spans);
                let (mut best, mut best_len) = (0, 0);
                for (i, &(a, b)) in spans.iter().enumerate() {
                    if b - a >= best_len {
                        (best, best_len) = (i, b - a);
                    }
                }
                SCAN_BEGIN + spans[..best].iter().map(|&(a, b)| b - a).sum::<usize>()
            }
        };
        out.push(&text[offsets[start]..offsets[start + cut]]);
        start += cut;
    }
    if start < n {
        out.push(&text[offsets[start]..]);
    }
    out
}

/// PyThaiNLP's `rejoin_formatted_num`: the words spanning a formatted number
/// (`\d+(?:[:,.]\d+)+`, times, decimals, addresses) become one.
fn rejoin_numbers<'a>(text: &'a str, words: Vec<&'a str>) -> Vec<&'a str> {
    let spans = formatted_numbers(text);
    if spans.is_empty() {
        return words;
    }
    let mut out = Vec::with_capacity(words.len());
    let mut pos = 0;
    let mut i = 0;
    let mut next = spans.into_iter().peekable();
    while i < words.len() {
        let Some(&(start, end)) = next.peek() else {
            break;
        };
        if pos >= start {
            let from = pos;
            while pos < end && i < words.len() {
                pos += words[i].len();
                i += 1;
            }
            if pos > from {
                out.push(&text[from..pos]);
            }
            next.next();
        } else {
            out.push(words[i]);
            pos += words[i].len();
            i += 1;
        }
    }
    out.extend_from_slice(&words[i..]);
    out
}

/// The byte spans of `\d+(?:[:,.]\d+)+` in `text` (Unicode digits, as Python's `\d`).
fn formatted_numbers(text: &str) -> Vec<(usize, usize)> {
    let digit = |c: char| c.is_ascii_digit() || ('๐'..='๙').contains(&c);
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !digit(chars[i].1) {
            i += 1;
            continue;
        }
        let start = chars[i].0;
        let mut j = i;
        while j < chars.len() && digit(chars[j].1) {
            j += 1;
        }
        let mut groups = 0;
        while j + 1 < chars.len() && matches!(chars[j].1, ':' | ',' | '.') && digit(chars[j + 1].1)
        {
            j += 1;
            while j < chars.len() && digit(chars[j].1) {
                j += 1;
            }
            groups += 1;
        }
        if groups > 0 {
            out.push((start, chars.get(j).map_or(text.len(), |c| c.0)));
        }
        i = j.max(i + 1);
    }
    out
}
