// env/user_sim_phrases.c: the phrase tables of the simulated customer's
// matcher (env/user_sim_match.c): for each concept, the words in English,
// Hinglish (romanised) and Hindi (Devanagari) that name it. Defines
// user_sim_concepts and user_sim_num_concepts.
//
// A concept is either a field concept (the task fields it names, by field
// name) or a cue that decides how a nearby field mention is read (a request,
// a negation, a statement about something already done, another person, ...).
// Phrases are separated by '|' and go through the matcher's own normaliser,
// so case, punctuation, a plural 's', nukta and chandrabindu do not matter.
// Prefix marks on a phrase:
//   '?'  the phrase is itself a question ("how much", "kitne mahine"): it asks
//        for its field even without a request cue or a question mark;
//   '!'  a field phrase that the customer never answers (PAN number, "your
//        name") and that hides the shorter phrases inside it;
//   '*'  (cue phrases of one word) any word starting with it ("bata*" covers
//        batayein, bataiye, batao, ...).
// A field concept whose fields the task does not have is a request for
// something the customer does not hold ("Sorry, I don't have that").
#include "env/user_sim_match.h"

const UserSimConcept user_sim_concepts[] = {
    // ---- identity --------------------------------------------------------
    {USIM_FIELD, "customer_id",
     "customer id|customer number|customer no|cust id|customer identification number|customer reference number|"
     "cif|cif number|cif no|crn|client id|grahak id|grahak number|grahak sankhya|ग्राहक आईडी|ग्राहक आई डी|"
     "ग्राहक संख्या|ग्राहक नंबर|ग्राहक क्रमांक|कस्टमर आईडी|कस्टमर आई डी|कस्टमर नंबर"},
    {USIM_FIELD, "date_of_birth",
     "date of birth|dob|d o b|birth date|birthdate|birthday|born|birth|janam tithi|janm tithi|janamtithi|"
     "janmtithi|janam din|janamdin|janam ki tareekh|janm ki tarikh|paidaish|जन्म तिथि|जन्मतिथि|जन्म की तारीख|"
     "जन्म तारीख|जन्म दिनांक|जन्मदिन|जन्म|पैदाइश|डेट ऑफ बर्थ|डीओबी"},
    {USIM_FIELD, "new_mobile",
     "new mobile|new mobile number|new mobile no|new phone|new phone number|new number|new contact number|"
     "updated mobile number|changed number|naya mobile|naya mobile number|naya number|नया मोबाइल|नया मोबाइल नंबर|"
     "नया नंबर"},
    {USIM_FIELD, "registered_mobile",
     "mobile|mobile number|mobile no|mob no|phone|phone number|phone no|cell number|cellphone|contact number|"
     "contact no|registered number|registered mobile|registered phone|whatsapp number|मोबाइल|मोबाइल नंबर|"
     "मोबाइल नम्बर|फोन|फोन नंबर|संपर्क नंबर|रजिस्टर्ड नंबर"},
    // Never held: answered with "I don't have that", and the words inside
    // ("name", "aadhaar") are not read as the task's fields.
    {USIM_FIELD, "customer_name",
     "!your name|!full name|!your full name|!aapka naam|!apna naam|!naam|!आपका नाम|!अपना नाम|!नाम"},
    {USIM_FIELD, "id_number",
     "!pan number|!pan card number|!pan no|!aadhaar number|!aadhar number|!aadhaar no|!passport number|"
     "!voter id number|!licence number|!license number|!आधार नंबर|!आधार संख्या|!पैन नंबर"},
    {USIM_FIELD, "age", "age|how old|umar|umra|उम्र|आयु"},
    // ---- accounts ---------------------------------------------------------
    {USIM_FIELD, "account_number account_id from_account to_account",
     "account|account number|account no|acct|acc no|ac no|a c|a c no|khata|khata number|khata sankhya|khate|"
     "account id|savings account|bank account|which account|खाता|खाते|खाता संख्या|खाता नंबर|अकाउंट|"
     "अकाउंट नंबर|एकाउंट"},
    {USIM_FIELD, "from_account",
     "from account|source account|debit account|debit from|account to debit|paying account|from which account|"
     "kis account se|kaunse account se|किस खाते से|किस अकाउंट से"},
    {USIM_FIELD, "to_account",
     "to account|to which account|account to credit|credit account|target account|receiving account|"
     "kis account mein|kaunse account mein|किस खाते में|किस अकाउंट में"},
    {USIM_FIELD, "payee_account_number",
     "payee account|payee account number|beneficiary account|beneficiary account number|recipient account|"
     "receiver account|destination account|labharthi khata|लाभार्थी खाता|लाभार्थी का खाता|प्राप्तकर्ता खाता"},
    {USIM_FIELD, "payee_name",
     "payee name|payee|beneficiary|beneficiary name|recipient|recipient name|receiver name|account holder name|"
     "name of the payee|name of the beneficiary|labharthi|labharthi ka naam|लाभार्थी|लाभार्थी का नाम|प्राप्तकर्ता|"
     "पाने वाले का नाम|?to whom|?whom|kisko|किसको"},
    {USIM_FIELD, "ifsc", "ifsc|ifsc code|ifs code|branch code|bank code|branch ifsc|आईएफएससी|आई एफ एस सी"},
    // ---- money and time ---------------------------------------------------
    {USIM_FIELD, "amount amount_each claim_amount monthly_amount monthly_pension new_limit estimated_total_income fd_amount "
     "rd_monthly_amount",
     "amount|?how much|how many rupees|?kitna|?kitni|?kitne|kitna paisa|rashi|raashi|raqam|rakam|?कितना|?कितनी|"
     "?कितने|रकम|राशि"},
    {USIM_FIELD, "amount_each", "amount each|each|per deposit|each deposit|per fd|har ek|har fd|प्रत्येक|हर एक"},
    {USIM_FIELD, "claim_amount", "claim amount|claim|claimed|claiming|dava|daava|दावा|दावा राशि|क्लेम"},
    {USIM_FIELD, "fd_amount", "fd amount|fixed deposit amount|lump sum|lumpsum|amount for the fd|fd ki rashi|एफडी राशि"},
    {USIM_FIELD, "rd_monthly_amount",
     "rd amount|rd instalment|rd installment|rd monthly amount|monthly instalment|amount for the rd|"
     "rd ki kist|आरडी किस्त"},
    {USIM_FIELD, "monthly_amount monthly_pension rd_monthly_amount",
     "per month|every month|each month|monthly|har mahine|har mahina|हर महीने|मासिक|प्रति माह"},
    {USIM_FIELD, "monthly_amount rd_monthly_amount", "monthly amount|instalment|installment|kist|kisht|किस्त"},
    {USIM_FIELD, "monthly_pension", "pension|monthly pension|pension amount|पेंशन"},
    {USIM_FIELD, "new_limit",
     "limit|new limit|card limit|daily limit|spending limit|transaction limit|seema|सीमा|लिमिट"},
    {USIM_FIELD, "estimated_total_income",
     "income|estimated income|total income|annual income|yearly income|earnings|salary|aay|aamdani|amdani|kamai|"
     "आय|आमदनी|कमाई|वार्षिक आय"},
    {USIM_FIELD, "tenure tenures fd_tenure rd_tenure",
     "tenure|?how long|duration|period|term|month|time period|maturity period|deposit period|?how many months|"
     "?how many years|?for how long|?kitne mahine|?kitne saal|?kitne din|?kitne samay|?kitne time|kitna samay|"
     "avadhi|muddat|mahine|अवधि|मुद्दत|?कितने महीने|?कितने साल|?कितने समय|महीने"},
    {USIM_FIELD, "tenures", "tenures|ladder|rung|which tenures"},
    {USIM_FIELD, "fd_tenure", "fd tenure|fd period|fd duration|tenure of the fd|fd term|fd kitne mahine|एफडी अवधि"},
    {USIM_FIELD, "rd_tenure", "rd tenure|rd period|rd duration|tenure of the rd|rd term|rd kitne mahine|आरडी अवधि"},
    {USIM_FIELD, "financial_year",
     "financial year|fy|year|assessment year|tax year|which year|vitt varsh|vittiya varsh|saal|वित्त वर्ष|"
     "वित्तीय वर्ष|साल|वर्ष"},
    {USIM_FIELD, "from_date incident_date issue_date to_date",
     "date|tareekh|tarikh|taarikh|tithi|तारीख|तिथि|दिनांक|डेट"},
    {USIM_FIELD, "from_date",
     "from date|start date|starting date|?from when|?since when|?from which date|?from what date|?kab se|?कब से|"
     "शुरुआत की तारीख"},
    {USIM_FIELD, "to_date",
     "to date|end date|ending date|?till when|?until when|?to when|?up to when|?to which date|?till which date|"
     "?up to which date|?kab tak|?कब तक|अंतिम तिथि"},
    {USIM_FIELD, "incident_date",
     "incident date|?when did|?when was|happen|happened|occur|occurred|took place|transaction date|"
     "date of transaction|date of the transaction|?kab hua|?kab hui|?कब हुआ|?कब हुई"},
    {USIM_FIELD, "issue_date", "issue date|date of issue|cheque date|dated|issued on"},
    // ---- instruments and documents -----------------------------------------
    {USIM_FIELD, "cheque_number",
     "cheque number|cheque no|check number|cheque|chq|chq no|cheque ka number|चेक|चेक नंबर|चेक संख्या"},
    {USIM_FIELD, "card_last_4_digits document_last4",
     "last 4|last four|last 4 digits|last four digits|last digit|ending digit|ends with|ending in|aakhri 4|"
     "antim 4|आखिरी 4|आखिरी चार|अंतिम 4|अंतिम चार|अंतिम अंक|आखिरी अंक"},
    {USIM_FIELD, "card_last_4_digits",
     "card|card number|which card|debit card|credit card|atm card|कार्ड|कार्ड नंबर"},
    {USIM_FIELD, "fd_id",
     "fd id|fd number|fd no|fd account|fd|fixed deposit|fixed deposit number|deposit number|deposit id|which fd|"
     "which deposit|एफडी|फिक्स्ड डिपॉजिट|सावधि जमा"},
    {USIM_FIELD, "document_type proof_document",
     "document|id proof|proof|ovd|kyc document|which document|aadhaar|aadhar|pan|pan card|passport|voter id|"
     "driving licence|driving license|dastavez|dastavej|saboot|praman|दस्तावेज|पहचान पत्र|प्रमाण|सबूत|डॉक्यूमेंट|"
     "आधार|पैन"},
    {USIM_FIELD, "document_type", "document type|type of document|id type|kind of document"},
    {USIM_FIELD, "proof_document", "proof document|supporting document|proof of address|address proof|evidence"},
    {USIM_FIELD, "email", "email|e mail|email id|email address|mail id|mail|gmail|ईमेल|ई मेल|मेल"},
    {USIM_FIELD, "delivery", "delivery|deliver|delivered|collect|email or branch|branch or email|courier|pick up|pickup|डिलीवरी"},
    {USIM_FIELD, "address_line",
     "address|address line|street|house|flat|house number|flat number|residential address|new address|"
     "current address|pata|ghar ka pata|पता|घर का पता|नया पता"},
    {USIM_FIELD, "city", "city|town|shahar|shehar|sheher|शहर|नगर"},
    {USIM_FIELD, "pincode", "pincode|pin code|pin|postal code|zip|zip code|post code|पिन कोड|पिनकोड|पिन"},
    {USIM_FIELD, "gold_weight",
     "gold weight|weight|gram|gm|how heavy|?how many grams|vajan|wajan|?kitne gram|वजन|ग्राम|?कितने ग्राम"},
    {USIM_FIELD, "purity", "purity|karat|carat|kt|shuddhta|shudhta|?how pure|शुद्धता|कैरेट"},

    // ---- cues -------------------------------------------------------------
    // Credentials a customer never gives out (and a bank never asks for).
    {USIM_SECRET, NULL,
     "otp|one time password|cvv|cvv2|card pin|atm pin|upi pin|mpin|m pin|pin number|password|passcode|"
     "net banking password|login password|security code|secret code|ओटीपी|पासवर्ड|सीवीवी|एटीएम पिन|यूपीआई पिन"},
    {USIM_REQUEST, NULL,
     "could you|can you|would you|will you|could i|can i|may i|can i have|may i have|could i have|can i get|"
     "could i get|may i have your|can i have your|could i have your|can i get your|could i get your|may i know|can i know|need|i need|we need|i ll need|i will need|i would need|require|required|"
     "share|provide|tell|tell me|let me know|give|give me|enter|mention|specify|confirm|verify|state|"
     "what|which|where|who|whose|how|when|do you have|do you know|remind me|repeat|once more|want to know|"
     "like to know|need to know|ask|asking|request|requesting|looking for|"
     "kya|kyaa|kaunsa|kaunsi|kaun sa|kaun si|konsa|konsi|kon sa|kaun|kis|zaroorat hai|zarurat hai|jarurat hai|"
     "jaroorat hai|chahiye|chaiye|chahie|sakte|sakti|sakenge|de do|de dijiye|dedo|dein|boliye|bolo|"
     "*bata|*btai|*btao|*btay|*dijiy|*dijie|*bhej|*likh|"
     "क्या|कौन|कौनसा|कौन सा|कौन सी|किस|चाहिए|जरूरत है|आवश्यकता है|दें|दो|बोलिए|सकते|सकती|साझा|प्रदान|*बता|"
     "*दीजि|*दीजिये|*भेज|*लिख"},
    // Politeness: makes a sentence a request but, unlike a request verb, does
    // not decide a mention on its own ("kripya mobile number mat batayein").
    {USIM_POLITE, NULL, "please|pls|plz|kindly|kripya|krupya|zara|कृपया|जरा"},
    {USIM_NEGATION, NULL,
     "no|not|never|dont|do not|does not|doesnt|wont|will not|wont need|dont want|do not want|no longer need|"
     "no need|no need for|not needed|not required|not necessary|"
     "unnecessary|needless|isnt needed|is not needed|dont need|do not need|dont share|do not share|dont give|"
     "dont tell|dont send|dont provide|without|skip|ignore|forget|except|other than|apart from|instead of|"
     "nahi|nahin|nhi|mat|na|zaroorat nahi|zarurat nahi|jarurat nahi|jaroorat nahi|nahi chahiye|rehne do|"
     "rehne dijiye|chhodiye|chodiye|chhodo|नहीं|मत|ना|न|जरूरत नहीं|आवश्यकता नहीं|नहीं चाहिए|रहने दीजिए|रहने दो|"
     "छोडिए"},
    // The agent lacks it: not a request by itself, but "could you share it?"
    // right after asks for it.
    {USIM_LACK, NULL,
     "dont have|do not have|dont see|do not see|cant see|cannot see|cant find|cannot find|could not find|couldnt find|"
     "unable to find|missing|not on file|not available|nahi mila|nahi mili|नहीं मिला|नहीं मिली|उपलब्ध नहीं"},
    // Said about something already given or done.
    {USIM_STATED, NULL,
     "verified|noted|received|got|i have your|we have your|i ve your|already|thank|thanx|thx|confirmed|updated|"
     "recorded|saved|matches|matched|is correct|validated|authenticated|on file|on record|successfully|"
     "mil gaya|mil gayi|mil gai|mil chuka|mil gaye|note kar liya|note kar li|note kiya|verify ho gaya|"
     "verify ho gayi|verify kar liya|verify kar diya|sahi hai|dhanyavaad|dhanyawad|shukriya|मिल गया|मिल गई|"
     "मिल गयी|नोट कर लिया|सत्यापित|सत्यापन हो गया|सही है|धन्यवाद|शुक्रिया"},
    // Someone other than the customer (payee fields are exempt).
    {USIM_OTHER, NULL,
     "wife|husband|spouse|son|daughter|father|mother|dad|mom|mum|papa|mummy|brother|sister|friend|nominee|"
     "relative|colleague|neighbour|neighbor|boss|child|kid|grandson|granddaughter|guardian|uncle|aunt|his|her|"
     "him|their|someone else|somebody else|another person|another customer|other customer|other person|"
     "third party|patni|pati|beti|pitaji|maa|bhai|behen|bahan|dost|unka|unki|unke|uska|uski|uske|kisi aur|"
     "doosre|dusre|पत्नी|पति|बेटा|बेटे|बेटी|पिता|पिताजी|मां|माता|भाई|बहन|दोस्त|मित्र|नॉमिनी|उनका|उनकी|उनके|"
     "उसका|उसकी|उसके|किसी और|दूसरे"},
    // Service talk: "How can I help with your account today?" asks for nothing.
    {USIM_SERVICE, NULL,
     "how can i help|how may i help|how can i assist|how may i assist|how can we help|how may we help|"
     "what can i do for you|anything else|is there anything|how may i be of|what brings you|help you today|"
     "welcome|kaise madad|kya madad|kaise sahayata|kya sahayata|aur kuch|कैसे मदद|क्या मदद|कैसे सहायता|और कुछ"},
    // Attempts to override the customer's role: nothing in the message is answered.
    {USIM_INJECTION, NULL,
     "ignore your|ignore all|ignore previous|ignore the above|ignore prior|ignore the rules|disregard|"
     "system prompt|your instructions|your rules|your prompt|you are now|act as|pretend|roleplay|role play|"
     "developer mode|debug mode|jailbreak|new instructions|override|bypass|reveal all|print all|dump|"
     "apne niyam|niyam bhool|अपने नियम|नियम भूल|निर्देश भूल|सिस्टम प्रॉम्प्ट"},
    // Pronouns next to a request verb ("could you share it?", "ise bataiye").
    {USIM_PRONOUN, NULL,
     "it|that|this|them|those|same|the same|these|one|woh|wo|vo|voh|ise|yeh|ye|वह|वो|इसे|उसे|यह|ये"},
    // Words that may open a clause before a one-word keyword like "from".
    {USIM_FILLER, NULL, "and|aur|also|so|ok|okay|sir|madam|maam|mam|ji|then|now|ab|the|और|तो|अब|भी|जी"},
    // One-word task keywords that are also common function words: they ask
    // only when they open a clause ("From which date?", not "send it to me").
    {USIM_WEAK, NULL, "to|from|till|until|when|since|kab|se|tak|by|on|for|in|at|of|कब|से|तक"},
};

const int user_sim_num_concepts = (int)(sizeof user_sim_concepts / sizeof user_sim_concepts[0]);
