//! "Did you mean": the closest known name to a misspelt one.

/// The edit distance between two strings (insertions, deletions, substitutions).
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// The candidate closest to `name`: equal but for case (`conv2d` → `Conv2D`), or within a
/// third of its length in edits.
pub fn did_you_mean<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    if let Some(c) = candidates.iter().find(|c| c.to_lowercase() == lower) {
        return Some(c);
    }
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (levenshtein(&lower, &c.to_lowercase()), *c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("relu", "relu"), 0);
    }

    #[test]
    fn suggestions() {
        let layers = ["Dense", "Conv2D", "MaxPooling2D", "Dropout"];
        assert_eq!(did_you_mean("Dens", &layers), Some("Dense"));
        assert_eq!(did_you_mean("conv2d", &layers), Some("Conv2D"));
        assert_eq!(did_you_mean("Droput", &layers), Some("Dropout"));
        assert_eq!(did_you_mean("LSTM", &layers), None);
    }
}
