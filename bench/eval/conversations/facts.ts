/**
 * What the people in the generated conversations say about their lives, and what is asked
 * about it afterwards. Each fact type writes its evidence turns (first person, as said in
 * the chat) and the questions that need them (third person, as an agent would ask its
 * memory), deliberately in other words than the evidence: other word forms ("went" / "go",
 * "adopted" / "adopt"), synonyms ("climb" / "hiked"), or no shared content word at all for
 * the open-domain ones. Written for this project; see generate.ts for how they are used.
 */

export type ConversationQuestionKind = 'single-hop' | 'multi-hop' | 'temporal' | 'open-domain';

export interface FactQuestion {
  kind: ConversationQuestionKind;
  /** `{N}` is replaced by the speaker's name. */
  text: string;
  /** Indexes into the fact's evidence turns that answer it (all of them when absent). */
  evidence?: number[];
}

export interface Fact {
  /** Evidence turns, said by the fact's owner, in order; each goes to a later session than the one before. */
  evidence: string[];
  /** What the other speaker answers right after an evidence turn: topical, not evidence. */
  reactions: string[];
  questions: FactQuestion[];
}

export type FactType = (pick: <T>(items: readonly T[]) => T) => Fact;

const PET_NAMES = ['Biscuit', 'Pepper', 'Mochi', 'Juniper', 'Ziggy', 'Nala', 'Bruno', 'Olive', 'Tofu', 'Rocket', 'Hazel', 'Pickle'];
const CITIES = ['Lisbon', 'Kyoto', 'Reykjavik', 'Marrakech', 'Vancouver', 'Oaxaca', 'Tbilisi', 'Hanoi', 'Edinburgh', 'Cape Town', 'Valparaiso', 'Krakow'];
const PEOPLE = ['Mrs. Alvarez', 'Mr. Okafor', 'Dana Whitfield', 'Hiroshi Tanaka', 'Beatriz Lima', 'Samuel Osei', 'Greta Lindqvist', 'Omar Haddad'];

export const SINGLE_FACTS: FactType[] = [
  (pick) => {
    const [breed, name] = [pick(['beagle', 'corgi', 'husky', 'labrador', 'greyhound', 'dachshund']), pick(PET_NAMES)];
    return {
      evidence: [`We adopted a ${breed} puppy from the shelter yesterday and named him ${name}!`],
      reactions: [`Aww, ${name} is the perfect name for a ${breed}. Send pictures!`],
      questions: [
        { kind: 'single-hop', text: `What did {N} name the dog?` },
        { kind: 'temporal', text: `When did {N} adopt a puppy?` },
      ],
    };
  },
  (pick) => {
    const [job, company] = [pick(['nurse', 'data analyst', 'sous-chef', 'landscape architect', 'paralegal', 'physiotherapist']), pick(['Northwind', 'Brightline Health', 'Calder & Finch', 'Greenway Studio', 'Harbor Bistro', 'Altamira Labs'])];
    return {
      evidence: [`Big news: I started my new position as a ${job} at ${company} this Monday.`],
      reactions: ['Congratulations! How was the first week?'],
      questions: [
        { kind: 'single-hop', text: `Where does {N} work now?` },
        { kind: 'temporal', text: `When did {N} begin working at ${company}?` },
      ],
    };
  },
  (pick) => {
    const [instrument, teacher] = [pick(['cello', 'violin', 'trumpet', 'piano', 'saxophone', 'banjo']), pick(PEOPLE)];
    return {
      evidence: [`My ${instrument} lessons are going well, ${teacher} is such a patient teacher.`],
      reactions: [`I always wanted to play the ${instrument}, that's so cool.`],
      questions: [{ kind: 'single-hop', text: `Who gives {N} music lessons?` }],
    };
  },
  (pick) => {
    const [city, did] = [pick(CITIES), pick(['ate way too much street food', 'took a cooking class with a local family', 'rented bikes and rode along the coast', 'spent a whole day in the old museums', 'went on a night walking tour'])];
    return {
      evidence: [`We went to ${city} last week and ${did}.`],
      reactions: [`${city} has been on my list forever! Was it crowded?`],
      questions: [
        { kind: 'single-hop', text: `What did {N} do on the trip to ${city}?` },
        { kind: 'temporal', text: `When did {N} travel to ${city}?` },
      ],
    };
  },
  (pick) => {
    const [race, time] = [pick(['half marathon', 'marathon', '10k', 'trail race']), pick(['1:58', '4:12', '52 minutes', '2:31'])];
    return {
      evidence: [`I ran my first ${race} yesterday and finished in ${time}, my legs are jelly.`],
      reactions: ['You must be so proud, I get tired running for the bus.'],
      questions: [
        { kind: 'single-hop', text: `What was {N}'s finishing time in the ${race}?` },
        { kind: 'temporal', text: `When did {N} run the ${race}?` },
      ],
    };
  },
  (pick) => {
    const [book, author] = pick([
      ['The Overstory', 'Richard Powers'], ['Piranesi', 'Susanna Clarke'], ['Station Eleven', 'Emily St. John Mandel'],
      ['The Remains of the Day', 'Kazuo Ishiguro'], ['Circe', 'Madeline Miller'], ['Pachinko', 'Min Jin Lee'],
    ] as const);
    return {
      evidence: [`I'm reading ${book} by ${author} and I can't put it down.`],
      reactions: ['I need a good book for the holidays, add it to my list.'],
      questions: [{ kind: 'single-hop', text: `Which novel was {N} reading?` }],
    };
  },
  (pick) => {
    const [sister, month] = [pick(['Lena', 'Ruth', 'Ama', 'Ines', 'Kiri', 'Mei']), pick(['June', 'September', 'October', 'April'])];
    return {
      evidence: [`My sister ${sister} is getting married in ${month}, and I'm the maid of honour!`],
      reactions: ['A wedding! Have you started on the speech?'],
      questions: [
        { kind: 'single-hop', text: `What is the name of {N}'s sister?` },
        { kind: 'temporal', text: `When is the wedding of {N}'s sister?` },
      ],
    };
  },
  (pick) => {
    const area = pick(['Riverside', 'the Old Town', 'Maple Heights', 'the harbour district', 'Eastgate', 'Hillcrest']);
    return {
      evidence: [`We finally moved into the new apartment in ${area} on Saturday, boxes everywhere.`],
      reactions: ['Moving is the worst. Do you like the neighbourhood so far?'],
      questions: [
        { kind: 'single-hop', text: `Which neighbourhood does {N} live in now?` },
        { kind: 'temporal', text: `When did {N} move house?` },
      ],
    };
  },
  (pick) => {
    const [car, colour] = [pick(['Honda Civic', 'Subaru Outback', 'Volvo estate', 'Toyota Prius', 'Mini Cooper']), pick(['red', 'dark green', 'silver', 'sky blue'])];
    return {
      evidence: [`I bought a used ${colour} ${car} on Thursday, no more waiting for buses.`],
      reactions: ['Nice, road trip soon then?'],
      questions: [
        { kind: 'single-hop', text: `What kind of car does {N} have?` },
        { kind: 'temporal', text: `When did {N} buy a car?` },
      ],
    };
  },
  (pick) => {
    const [dish, who] = [pick(['a lemon drizzle cake', 'cinnamon rolls', 'a chocolate torte', 'banana bread', 'a pavlova']), pick(['mom', 'dad', 'grandmother', 'best friend'])];
    return {
      evidence: [`I baked ${dish} for my ${who}'s birthday and it actually turned out great.`],
      reactions: ['Save me a slice next time!'],
      questions: [{ kind: 'single-hop', text: `What did {N} bake for the birthday?` }],
    };
  },
  (pick) => {
    const subject = pick(['pottery', 'Spanish', 'photography', 'woodworking', 'creative writing', 'accounting']);
    return {
      evidence: [`I signed up for an evening ${subject} course at the community college.`],
      reactions: ['Evening classes are hard after a full day, good for you.'],
      questions: [{ kind: 'single-hop', text: `What class did {N} enrol in?` }],
    };
  },
  (pick) => {
    const [bone, sport] = [pick(['wrist', 'ankle', 'collarbone', 'finger']), pick(['football', 'basketball', 'volleyball', 'skateboarding'])];
    return {
      evidence: [`I broke my ${bone} playing ${sport}, so I'm in a cast for six weeks.`],
      reactions: ['Ouch! Does it hurt a lot?'],
      questions: [
        { kind: 'single-hop', text: `How did {N} get injured?` },
        { kind: 'temporal', text: `When did {N} break the ${bone}?` },
      ],
    };
  },
  (pick) => {
    const place = pick(['food bank', 'animal shelter', 'children\'s hospital', 'public library', 'community garden']);
    return {
      evidence: [`I volunteered at the ${place} this morning, sorting donations for four hours.`],
      reactions: ['That is such a kind way to spend a Saturday.'],
      questions: [
        { kind: 'single-hop', text: `Where does {N} do volunteer work?` },
        { kind: 'temporal', text: `When did {N} volunteer at the ${place}?` },
      ],
    };
  },
  (pick) => {
    const [band, venue] = [pick(['Arcade Fire', 'Khruangbin', 'Fleetwood Mac tribute band', 'Bon Iver', 'The National']), pick(['the Roundhouse', 'the Fillmore', 'the arena downtown', 'an open-air stage'])];
    return {
      evidence: [`Saw ${band} live at ${venue} last night, best concert of my life.`],
      reactions: ['So jealous, I could not get tickets.'],
      questions: [
        { kind: 'single-hop', text: `Which band did {N} see perform?` },
        { kind: 'temporal', text: `When did {N} go to the ${band} concert?` },
      ],
    };
  },
  (pick) => {
    const veg = pick(['tomatoes and zucchini', 'peppers and beans', 'strawberries', 'pumpkins', 'kale and chard']);
    return {
      evidence: [`The garden is finally producing, we have more ${veg} than we can eat.`],
      reactions: ['Homegrown always tastes better.'],
      questions: [{ kind: 'single-hop', text: `What vegetables or fruit does {N} grow?` }],
    };
  },
  (pick) => {
    const [friend, gift] = [pick(['Tariq', 'Jess', 'Bea', 'Nikolai', 'Aroha', 'Sven']), pick(['a vintage record player', 'a handmade quilt', 'a pasta machine', 'a telescope'])];
    return {
      evidence: [`${friend} gave me ${gift} for my birthday, I nearly cried.`],
      reactions: ['What a thoughtful friend.'],
      questions: [{ kind: 'single-hop', text: `What birthday present did {N} get from ${friend}?` }],
    };
  },
  (pick) => {
    const role = pick(['team lead', 'senior engineer', 'head nurse', 'regional manager', 'principal designer']);
    return {
      evidence: [`I got promoted to ${role} today, they told me in the morning meeting.`],
      reactions: ['You totally deserve it!'],
      questions: [
        { kind: 'single-hop', text: `What is {N}'s new role after the promotion?` },
        { kind: 'temporal', text: `When was {N} promoted?` },
      ],
    };
  },
  (pick) => {
    const [subject, event] = [pick(['sunflower field', 'portrait of my grandfather', 'stormy seascape', 'city skyline at dusk']), pick(['school fundraiser', 'local art fair', 'charity auction'])];
    return {
      evidence: [`I painted a ${subject} for the ${event}.`],
      reactions: ['I had no idea you were an artist!'],
      questions: [{ kind: 'single-hop', text: `What artwork did {N} make for the ${event}?` }],
    };
  },
  (pick) => {
    const mountain = pick(['Mount Rainier', 'Ben Nevis', 'Mount Olympus', 'Table Mountain', 'Snowdon', 'Mount Fuji']);
    return {
      evidence: [`We hiked all the way up ${mountain} on Sunday, the view from the summit was unreal.`],
      reactions: ['My knees hurt just thinking about it.'],
      questions: [
        { kind: 'single-hop', text: `Which peak did {N} climb?` },
        { kind: 'temporal', text: `When did {N} go hiking on ${mountain}?` },
      ],
    };
  },
  (pick) => {
    const allergen = pick(['peanuts', 'shellfish', 'sesame', 'gluten', 'penicillin']);
    return {
      evidence: [`Turns out I'm allergic to ${allergen}, the doctor confirmed it after the tests.`],
      reactions: ['That must make eating out tricky.'],
      questions: [{ kind: 'single-hop', text: `What allergy does {N} have?` }],
    };
  },
];

export const MULTI_FACTS: FactType[] = [
  (pick) => {
    const [dog, cat] = [pick(PET_NAMES), pick(['Miso', 'Clementine', 'Shadow', 'Figaro', 'Luna'])];
    return {
      evidence: [`${dog} the dog loves the beach, he runs straight into the waves.`, `We brought home a kitten called ${cat}, she already bosses ${dog} around.`],
      reactions: ['Beach dogs are the happiest dogs.', 'Kittens rule the house, it is known.'],
      questions: [{ kind: 'multi-hop', text: `What animals does {N} have at home?` }],
    };
  },
  (pick) => {
    const [a, b] = [pick(CITIES.slice(0, 6)), pick(CITIES.slice(6))];
    return {
      evidence: [`Just got back from a long weekend in ${a}, the light there is beautiful.`, `${b} was even better than I imagined, I want to go back already.`],
      reactions: ['Welcome back! Any souvenirs?', 'You travel so much, I am envious.'],
      questions: [{ kind: 'multi-hop', text: `Which places has {N} visited this year?` }],
    };
  },
  (pick) => {
    const [s1, s2] = [pick(['tennis', 'badminton', 'squash']), pick(['swimming', 'rock climbing', 'rowing'])];
    return {
      evidence: [`I joined a ${s1} league at work, we play every Wednesday.`, `I've also taken up ${s2} on weekends to build some strength.`],
      reactions: ['A work league sounds fun.', 'Where do you find the energy?'],
      questions: [{ kind: 'multi-hop', text: `What sports does {N} do?` }],
    };
  },
  (pick) => {
    const [k1, k2] = [pick(['Ella', 'Nico', 'Saoirse', 'Kofi', 'Anya']), pick(['Theo', 'Ruby', 'Malik', 'Iris', 'Jonas'])];
    return {
      evidence: [`${k1} started kindergarten today and didn't even look back at the gate.`, `${k2} lost a first tooth at dinner and now wants to meet the tooth fairy.`],
      reactions: ['They grow up so fast!', 'That is adorable.'],
      questions: [{ kind: 'multi-hop', text: `What are the names of {N}'s kids?` }],
    };
  },
  (pick) => {
    const [l1, l2] = [pick(['Portuguese', 'Japanese', 'Italian']), pick(['Korean', 'German', 'Arabic'])];
    return {
      evidence: [`I've been practising ${l1} with an app every morning before work.`, `My ${l2} conversation group meets on Thursdays, it's humbling.`],
      reactions: ['Duolingo streaks are serious business.', 'Speaking is the hardest part.'],
      questions: [{ kind: 'multi-hop', text: `Which foreign languages is {N} studying?` }],
    };
  },
  (pick) => {
    const [old, next] = [pick(['the bank', 'the call centre', 'the logistics firm']), pick(['a small design studio', 'a climate startup', 'the city council'])];
    return {
      evidence: [`I handed in my notice at ${old} today, it was time.`, `I start at ${next} next month, I'm nervous and excited.`],
      reactions: ['Brave move!', 'New beginnings!'],
      questions: [{ kind: 'multi-hop', text: `Which employer did {N} leave, and where is the next job?` }],
    };
  },
];

export const OPEN_FACTS: FactType[] = [
  () => ({
    evidence: ['I foster kittens for the rescue and spend every Saturday at the shelter walking dogs.'],
    reactions: ['You have such a big heart.'],
    questions: [{ kind: 'open-domain', text: 'Would {N} be happy working as a veterinary assistant?' }],
  }),
  () => ({
    evidence: ['I spend nearly every evening at the bouldering gym, and on weekends we go trail running.'],
    reactions: ['I get tired just hearing that.'],
    questions: [{ kind: 'open-domain', text: 'Is {N} an athletic, active person?' }],
  }),
  () => ({
    evidence: ['I have been reading everything I can about black holes, and I bought a small telescope for the balcony.'],
    reactions: ['The sky has been clear lately, perfect timing.'],
    questions: [{ kind: 'open-domain', text: 'What subject might {N} want to study at university?' }],
  }),
  () => ({
    evidence: ['Choir at church on Sunday was beautiful, I sing alto and the hymns always calm me down.'],
    reactions: ['That sounds peaceful.'],
    questions: [{ kind: 'open-domain', text: 'Does {N} have a religious faith?' }],
  }),
  () => ({
    evidence: ['Honestly I cannot stand crowds and loud noise, I would rather stay home with a book and tea.'],
    reactions: ['Same, a quiet night in is underrated.'],
    questions: [{ kind: 'open-domain', text: 'Would {N} enjoy a three-day music festival?' }],
  }),
  () => ({
    evidence: ['It has been five years since I stopped eating meat and dairy, I feel great.'],
    reactions: ['I should try that for a month.'],
    questions: [{ kind: 'open-domain', text: 'Would {N} order a steak at a restaurant?' }],
  }),
  () => ({
    evidence: ['I grew up in a fishing village and still miss waking up to the sound of the waves.'],
    reactions: ['That sounds idyllic.'],
    questions: [{ kind: 'open-domain', text: 'Would {N} like living near the ocean?' }],
  }),
  () => ({
    evidence: ['I spent the whole weekend rebuilding the carburettor on my old motorbike, and it runs again.'],
    reactions: ['I can barely change a tyre.'],
    questions: [{ kind: 'open-domain', text: 'Is {N} handy with engines and machines?' }],
  }),
];
