// Types for the two CommonJS modules lexical-terms.ts loads (neither package ships types).
declare module 'wink-porter2-stemmer' {
  const stem: (word: string) => string;
  export default stem;
}
declare module 'wink-lexicon/src/wn-verb-exceptions.js' {
  const exceptions: Record<string, string>;
  export default exceptions;
}
declare module 'wink-lexicon/src/wn-noun-exceptions.js' {
  const exceptions: Record<string, string>;
  export default exceptions;
}
