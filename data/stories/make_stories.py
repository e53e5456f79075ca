#!/usr/bin/env python3
"""Writes train.jsonl and valid.jsonl: short TinyStories-style stories about Zorbo, a small
green dragon, in the simple words the stories260K model knows. Each story is an opening, a
themed middle and an ending, all hand-written here; the combination is deterministic.
Themes 0-26 are for training and themes 27-29 only for validation, so the validation
stories are new events (with the same character). Run: python3 make_stories.py"""
import json
import os

OPENINGS = [
    "Once upon a time, there was a little green dragon named Zorbo.",
    "Once upon a time, in a big forest, there lived a dragon named Zorbo.",
    "One day, a small dragon named Zorbo woke up in his cave.",
    "Zorbo was a kind dragon. He had big wings and a long tail.",
    "Once upon a time, there was a happy dragon. His name was Zorbo.",
    "There was a little dragon named Zorbo. He lived on a hill near a town.",
    "Once upon a time, Zorbo the dragon lived in a warm cave by the sea.",
    "Zorbo was a young dragon who loved to fly in the sky.",
    "One sunny day, Zorbo the dragon went out to play.",
    "Once there was a green dragon named Zorbo. He was very friendly.",
    "Zorbo the dragon had many friends in the park.",
    "Once upon a time, a dragon named Zorbo lived near a big tree.",
]

THEMES = [
    "Zorbo saw a red ball in the grass. He picked it up and looked for its owner. A little girl named Lily was sad. Zorbo gave her the ball, and Lily smiled.",
    "Zorbo wanted to bake a cake. He mixed eggs and milk in a big bowl. He used his warm breath to bake it. The cake was yummy, and he shared it with his friends.",
    "A little bird fell from its nest. Zorbo saw the bird and said, \"Do not be scared. I will help you.\" He flew up and put the bird back in the nest. The bird sang a happy song.",
    "Zorbo and Tim played hide and seek. Zorbo was too big to hide behind the tree. Tim laughed and said, \"I see your tail, Zorbo!\" They both laughed and played all day.",
    "It was a cold day. The children in the town were cold. Zorbo blew warm air on them. The children were happy and said, \"Thank you, Zorbo!\"",
    "Zorbo found a shiny stone in the river. He wanted to keep it. Then he saw a boy who was looking for it. Zorbo gave the stone to the boy. The boy hugged Zorbo.",
    "Zorbo wanted to learn to swim. He went to the lake with his friend the duck. At first he was scared. The duck said, \"Kick your legs!\" Soon Zorbo could swim.",
    "One night, Zorbo could not sleep. He looked at the moon and the stars. His mom came and sang a soft song. Zorbo closed his eyes and went to sleep.",
    "Zorbo and Lily went to the park. They played on the swing and the slide. Zorbo pushed Lily on the swing. Lily went very high and laughed.",
    "A big storm came to the town. The wind was strong and the rain was cold. Zorbo used his big wings to keep his friends dry. Everyone was safe.",
    "Zorbo saw a cat in a tall tree. The cat could not get down. Zorbo flew up and gave the cat a ride. The cat said, \"Meow!\" and was happy.",
    "Zorbo liked to draw. He drew a big sun and a green tree. He showed the picture to his mom. His mom said, \"What a pretty picture, Zorbo!\"",
    "Zorbo was hungry. He wanted to eat an apple. He saw a big apple on a tree. He shared the apple with a little bunny. They ate it together.",
    "Zorbo had a little red car. He played with it every day. One day the car broke. His dad fixed the car, and Zorbo said, \"Thank you, dad!\"",
    "Zorbo met a new friend at the park. The friend was a little boy named Ben. Ben was shy at first. Zorbo smiled and said, \"Let's play!\" Soon they were best friends.",
    "Zorbo wanted to fly very high. He flapped his wings and went up to the clouds. The clouds were soft and white. He had so much fun in the sky.",
    "Zorbo saw that his friend Sue was sad. Her toy was lost. Zorbo looked under the bed and in the box. He found the toy and Sue was happy again.",
    "Zorbo went to the beach. He built a big sand castle. A wave came and took the castle away. Zorbo laughed and built a new one.",
    "Zorbo liked to help his mom. He helped her clean the cave. He put his toys in the box. His mom gave him a big hug.",
    "Zorbo found a little dog in the rain. The dog was wet and cold. Zorbo took the dog to his warm cave. The dog wagged its tail.",
    "Zorbo wanted to sing a song. He sang very loud. The birds came to listen. They sang with him, and it was a happy song.",
    "Zorbo and his friends had a picnic. They ate bread and cake and drank juice. The sun was warm. It was a very nice day.",
    "Zorbo saw a big hill. He wanted to roll down the hill. He rolled and rolled and laughed. At the bottom he was dizzy but happy.",
    "Zorbo had a little garden. He gave water to the flowers every day. The flowers grew big and pretty. Zorbo was proud of his garden.",
    "Zorbo was playing with a ball. He kicked it too hard and it went into the pond. A frog jumped on the ball and pushed it back. Zorbo said, \"Thank you, frog!\"",
    "Zorbo wanted to read a book. He did not know all the words. His friend Lily helped him. Soon Zorbo could read the whole book.",
    "Zorbo made a kite with his dad. They went to the hill. The wind took the kite up high. Zorbo ran and held the string.",
    # Validation themes.
    "Zorbo saw a little mouse who was hungry. He gave the mouse some cheese. The mouse said, \"You are a good dragon, Zorbo.\" They became friends.",
    "Zorbo went to the town to buy some bread. The man at the shop was scared of the big dragon. Zorbo smiled and said, \"Hello!\" The man smiled too and gave him the bread.",
    "Zorbo played in the snow with Tim. They made a big snowman. Zorbo used his warm breath to make a hat of ice. Tim said it was the best snowman.",
]
N_TRAIN_THEMES = 27

ENDINGS = [
    "From that day on, Zorbo was very happy.",
    "Zorbo learned that it is good to help others.",
    "The end.",
    "Zorbo went home and had a good sleep.",
    "Everyone said that Zorbo was the best dragon in the world.",
    "Zorbo smiled. It was a good day.",
    "And Zorbo and his friends played together every day.",
    "Zorbo was happy, and so were his friends.",
    "That night, Zorbo told his mom all about his day.",
    "Zorbo knew that sharing makes everyone happy.",
]


def story(i, theme):
    return " ".join([OPENINGS[(i * 7 + theme) % len(OPENINGS)], THEMES[theme], ENDINGS[(i * 3 + theme) % len(ENDINGS)]])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    train = [story(i, i % N_TRAIN_THEMES) for i in range(81)]
    valid = [story(i, N_TRAIN_THEMES + i % (len(THEMES) - N_TRAIN_THEMES)) for i in range(9)]
    for name, rows in (("train.jsonl", train), ("valid.jsonl", valid)):
        with open(os.path.join(here, name), "w", encoding="utf-8") as f:
            for s in rows:
                f.write(json.dumps({"text": s}) + "\n")


if __name__ == "__main__":
    main()
