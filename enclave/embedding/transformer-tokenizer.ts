/**
 * Text -> token ids for transformer models, by @huggingface/tokenizers (the pure-JS port of
 * Hugging Face's tokenizers): from the model's tokenizer.json, or from a BERT WordPiece
 * vocab.txt, which is turned into the tokenizer.json a BERT tokenizer would have.
 *
 * The library has no truncation, so it is done here the way Hugging Face truncates one
 * sequence: the text's tokens are cut to leave room for the special tokens, which are then
 * added ([CLS] ... [SEP] for BERT), so a truncated text still ends with its [SEP].
 */
import { Tokenizer } from '@huggingface/tokenizers';
import type { TokenizerFile } from './transformer-manifest.js';

export interface EncodedText {
  ids: number[];
  /** Segment ids (token_type_ids); all 0 for a single text. */
  typeIds: number[];
}

/** BERT's special tokens, in the order vocab.txt files list them. */
const BERT_SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

export class SentenceTokenizer {
  /** Special tokens added around every text. */
  readonly specialTokens: number;

  private constructor(
    private readonly tokenizer: Tokenizer,
    /** Id written into padded positions (masked out, so any id in range would do). */
    readonly padId: number,
  ) {
    this.specialTokens = this.postProcess([]).tokens.length;
  }

  /** From the contents of tokenizer.json or vocab.txt. */
  static load(file: TokenizerFile, text: string, options: { lowercase: boolean }): SentenceTokenizer {
    const json = file === 'vocab.txt' ? tokenizerJsonFromVocab(parseVocabTxt(text), options.lowercase) : parseJson(text);
    // The second argument is tokenizer_config.json, whose settings only matter for decoding
    // and for tokenizer types other than BERT's.
    const tokenizer = new Tokenizer(json, {});
    const padding = (json as { padding?: { pad_id?: unknown } }).padding;
    const padId = typeof padding?.pad_id === 'number' ? padding.pad_id : (tokenizer.token_to_id('[PAD]') ?? 0);
    return new SentenceTokenizer(tokenizer, padId);
  }

  /** The text's tokens with the special tokens, cut to at most `maxLength` ids. */
  encode(text: string, maxLength: number): EncodedText {
    const room = maxLength - this.specialTokens;
    if (room < 1) throw new Error(`max_length ${maxLength} leaves no room beside ${this.specialTokens} special tokens`);
    const tokens = this.tokenizer.tokenize(text, { add_special_tokens: false });
    const { tokens: withSpecials, token_type_ids } = this.postProcess(tokens.slice(0, room));
    return { ids: withSpecials.map((token) => this.id(token)), typeIds: token_type_ids ?? new Array<number>(withSpecials.length).fill(0) };
  }

  private postProcess(tokens: string[]): { tokens: string[]; token_type_ids?: number[] } {
    const processor = this.tokenizer.post_processor;
    return processor ? processor(tokens, null, true) : { tokens };
  }

  private id(token: string): number {
    const id = this.tokenizer.token_to_id(token) ?? this.tokenizer.model?.unk_token_id;
    if (id === undefined) throw new Error(`token "${token}" has no id and the tokenizer has no unknown token`);
    return id;
  }
}

function parseJson(text: string): object {
  try {
    const json = JSON.parse(text) as unknown;
    if (typeof json === 'object' && json !== null && !Array.isArray(json)) return json;
  } catch {
    // reported below
  }
  throw new Error('tokenizer.json is not a JSON object');
}

/** vocab.txt: one token per line, the line number is its id. */
function parseVocabTxt(text: string): string[] {
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  if (lines.length === 0) throw new Error('vocab.txt is empty');
  if (new Set(lines).size !== lines.length) throw new Error('vocab.txt lists a token twice');
  return lines;
}

/**
 * The tokenizer.json of a BERT WordPiece tokenizer over `vocab` (what Hugging Face's
 * BertTokenizerFast writes): BERT normaliser, BERT pre-tokeniser, WordPiece with "##"
 * continuations, and [CLS] text [SEP].
 */
export function tokenizerJsonFromVocab(vocab: readonly string[], lowercase: boolean): object {
  const ids = new Map(vocab.map((token, id) => [token, id]));
  for (const token of ['[UNK]', '[CLS]', '[SEP]']) {
    if (!ids.has(token)) throw new Error(`vocab.txt has no ${token} token`);
  }
  const special = (token: string) => ({ SpecialToken: { id: token, type_id: 0 } });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: BERT_SPECIALS.filter((token) => ids.has(token)).map((token) => ({
      id: ids.get(token),
      content: token,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]')],
      pair: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]'), { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: Object.fromEntries(['[CLS]', '[SEP]'].map((token) => [token, { id: token, ids: [ids.get(token)], tokens: [token] }])),
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(ids),
    },
  };
}
